package aoa

import "golang.org/x/sys/cpu"

// nearestVector is brute force over eightBlocks' layout with AVX-512
// (nearest512), the same bits as nearestBrute; nil where the CPU lacks
// AVX-512.
var nearestVector = func() func(blocks []float64, nf int, z []float64) float64 {
	if !cpu.X86.HasAVX512F {
		return nil
	}
	return func(blocks []float64, nf int, z []float64) float64 {
		return nearest512(&blocks[0], len(blocks)/(8*nf), nf, &z[0])
	}
}()

// nearest512 returns the smallest squared distance from z (nf values) to
// nblocks blocks of eight points laid out by eightBlocks.
//
//go:noescape
func nearest512(blocks *float64, nblocks, nf int, z *float64) float64
