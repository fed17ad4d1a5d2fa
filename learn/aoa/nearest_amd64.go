package aoa

import "golang.org/x/sys/cpu"

// vectorNearest reports whether brute force compares eight points at a
// time with AVX-512 (nearest512); tests turn it off to compare.
var vectorNearest = cpu.X86.HasAVX512F

// nearest512 returns the smallest squared distance from z (nf values) to
// nblocks blocks of eight points laid out by eightBlocks.
//
//go:noescape
func nearest512(blocks *float64, nblocks, nf int, z *float64) float64

// nearestVector is nearestBrute over eightBlocks' layout of its points.
func nearestVector(blocks []float64, nf int, z []float64) float64 {
	return nearest512(&blocks[0], len(blocks)/(8*nf), nf, &z[0])
}
