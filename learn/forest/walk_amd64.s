#include "textflag.h"

// lanes holds 0…63, the rows' places in a group of sixty-four.
DATA lanes<>+0(SB)/4, $0
DATA lanes<>+4(SB)/4, $1
DATA lanes<>+8(SB)/4, $2
DATA lanes<>+12(SB)/4, $3
DATA lanes<>+16(SB)/4, $4
DATA lanes<>+20(SB)/4, $5
DATA lanes<>+24(SB)/4, $6
DATA lanes<>+28(SB)/4, $7
DATA lanes<>+32(SB)/4, $8
DATA lanes<>+36(SB)/4, $9
DATA lanes<>+40(SB)/4, $10
DATA lanes<>+44(SB)/4, $11
DATA lanes<>+48(SB)/4, $12
DATA lanes<>+52(SB)/4, $13
DATA lanes<>+56(SB)/4, $14
DATA lanes<>+60(SB)/4, $15
DATA lanes<>+64(SB)/4, $16
DATA lanes<>+68(SB)/4, $17
DATA lanes<>+72(SB)/4, $18
DATA lanes<>+76(SB)/4, $19
DATA lanes<>+80(SB)/4, $20
DATA lanes<>+84(SB)/4, $21
DATA lanes<>+88(SB)/4, $22
DATA lanes<>+92(SB)/4, $23
DATA lanes<>+96(SB)/4, $24
DATA lanes<>+100(SB)/4, $25
DATA lanes<>+104(SB)/4, $26
DATA lanes<>+108(SB)/4, $27
DATA lanes<>+112(SB)/4, $28
DATA lanes<>+116(SB)/4, $29
DATA lanes<>+120(SB)/4, $30
DATA lanes<>+124(SB)/4, $31
DATA lanes<>+128(SB)/4, $32
DATA lanes<>+132(SB)/4, $33
DATA lanes<>+136(SB)/4, $34
DATA lanes<>+140(SB)/4, $35
DATA lanes<>+144(SB)/4, $36
DATA lanes<>+148(SB)/4, $37
DATA lanes<>+152(SB)/4, $38
DATA lanes<>+156(SB)/4, $39
DATA lanes<>+160(SB)/4, $40
DATA lanes<>+164(SB)/4, $41
DATA lanes<>+168(SB)/4, $42
DATA lanes<>+172(SB)/4, $43
DATA lanes<>+176(SB)/4, $44
DATA lanes<>+180(SB)/4, $45
DATA lanes<>+184(SB)/4, $46
DATA lanes<>+188(SB)/4, $47
DATA lanes<>+192(SB)/4, $48
DATA lanes<>+196(SB)/4, $49
DATA lanes<>+200(SB)/4, $50
DATA lanes<>+204(SB)/4, $51
DATA lanes<>+208(SB)/4, $52
DATA lanes<>+212(SB)/4, $53
DATA lanes<>+216(SB)/4, $54
DATA lanes<>+220(SB)/4, $55
DATA lanes<>+224(SB)/4, $56
DATA lanes<>+228(SB)/4, $57
DATA lanes<>+232(SB)/4, $58
DATA lanes<>+236(SB)/4, $59
DATA lanes<>+240(SB)/4, $60
DATA lanes<>+244(SB)/4, $61
DATA lanes<>+248(SB)/4, $62
DATA lanes<>+252(SB)/4, $63
GLOBL lanes<>(SB), RODATA|NOPTR, $256

// func walk512(words *uint32, rows *uint8, stride, depth, groups int, leaves *uint32)
//
// Four sets of sixteen rows walk side by side, so that one set's gathers
// wait while the others' run.
TEXT ·walk512(SB), NOSPLIT, $0-48
	MOVQ words+0(FP), AX
	MOVQ rows+8(FP), BX
	MOVQ stride+16(FP), CX
	MOVQ depth+24(FP), DX
	MOVQ groups+32(FP), SI
	MOVQ leaves+40(FP), DI

	// Z31: 255 in every lane; Z27…Z30: each lane's row offset in its set
	// (its place × stride).
	MOVL $255, R8
	VPBROADCASTD R8, Z31
	VPBROADCASTD CX, Z26
	VMOVDQU32 lanes<>+0(SB), Z27
	VPMULLD Z26, Z27, Z27
	VMOVDQU32 lanes<>+64(SB), Z28
	VPMULLD Z26, Z28, Z28
	VMOVDQU32 lanes<>+128(SB), Z29
	VPMULLD Z26, Z29, Z29
	VMOVDQU32 lanes<>+192(SB), Z30
	VPMULLD Z26, Z30, Z30

	// R9: the group's first byte; R10: a group's bytes.
	XORQ R9, R9
	MOVQ CX, R10
	SHLQ $6, R10

group:
	TESTQ SI, SI
	JZ done
	VPBROADCASTD R9, Z26
	VPADDD Z26, Z27, Z4
	VPADDD Z26, Z28, Z5
	VPADDD Z26, Z29, Z6
	VPADDD Z26, Z30, Z7
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DX, R11

step:
	TESTQ R11, R11
	JZ stored
	// Each row's node word: feature | bin<<8 | next<<16.
	KXNORW K1, K1, K1
	KXNORW K2, K2, K2
	KXNORW K3, K3, K3
	KXNORW K4, K4, K4
	VPGATHERDD (AX)(Z0*4), K1, Z8
	VPGATHERDD (AX)(Z1*4), K2, Z9
	VPGATHERDD (AX)(Z2*4), K3, Z10
	VPGATHERDD (AX)(Z3*4), K4, Z11
	VPANDD Z31, Z8, Z12
	VPADDD Z4, Z12, Z12
	VPANDD Z31, Z9, Z13
	VPADDD Z5, Z13, Z13
	VPANDD Z31, Z10, Z14
	VPADDD Z6, Z14, Z14
	VPANDD Z31, Z11, Z15
	VPADDD Z7, Z15, Z15
	KXNORW K1, K1, K1
	KXNORW K2, K2, K2
	KXNORW K3, K3, K3
	KXNORW K4, K4, K4
	// Each row's code of the node's feature: the low byte of four.
	VPSRLD $8, Z8, Z16
	VPGATHERDD (BX)(Z12*1), K1, Z20
	VPSRLD $8, Z9, Z17
	VPGATHERDD (BX)(Z13*1), K2, Z21
	VPSRLD $8, Z10, Z18
	VPGATHERDD (BX)(Z14*1), K3, Z22
	VPSRLD $8, Z11, Z19
	VPGATHERDD (BX)(Z15*1), K4, Z23
	VPANDD Z31, Z16, Z16
	VPSRLD $16, Z8, Z0
	VPANDD Z31, Z17, Z17
	VPSRLD $16, Z9, Z1
	VPANDD Z31, Z18, Z18
	VPSRLD $16, Z10, Z2
	VPANDD Z31, Z19, Z19
	VPSRLD $16, Z11, Z3
	// The right child, one after the left, when code > bin: bin − code
	// is then negative.
	VPANDD Z31, Z20, Z20
	VPSUBD Z20, Z16, Z16
	VPSRLD $31, Z16, Z16
	VPADDD Z16, Z0, Z0
	VPANDD Z31, Z21, Z21
	VPSUBD Z21, Z17, Z17
	VPSRLD $31, Z17, Z17
	VPADDD Z17, Z1, Z1
	VPANDD Z31, Z22, Z22
	VPSUBD Z22, Z18, Z18
	VPSRLD $31, Z18, Z18
	VPADDD Z18, Z2, Z2
	VPANDD Z31, Z23, Z23
	VPSUBD Z23, Z19, Z19
	VPSRLD $31, Z19, Z19
	VPADDD Z19, Z3, Z3
	DECQ R11
	JMP step

stored:
	VMOVDQU32 Z0, (DI)
	VMOVDQU32 Z1, 64(DI)
	VMOVDQU32 Z2, 128(DI)
	VMOVDQU32 Z3, 192(DI)
	ADDQ $256, DI
	ADDQ R10, R9
	DECQ SI
	JMP group

done:
	VZEROUPPER
	RET

// func accumulate512(leaves *uint32, stride, n, trees int, leafRows **int32, probs **float32, classes int, acc *float32)
//
// Adds the leaf probabilities of n rows in trees trees (classes ≤ 16) to
// the rows' sums, tree by tree in order: lane by lane the scalar sum's
// float32 additions. leaves holds each tree's leaves in turn, stride
// apart.
TEXT ·accumulate512(SB), NOSPLIT, $0-64
	MOVQ leaves+0(FP), AX
	MOVQ stride+8(FP), R13
	MOVQ n+16(FP), SI
	MOVQ trees+24(FP), R12
	MOVQ leafRows+32(FP), BX
	MOVQ probs+40(FP), DX
	MOVQ classes+48(FP), CX
	MOVQ acc+56(FP), DI
	MOVL $1, R8
	SHLL CX, R8
	DECL R8
	KMOVW R8, K1
	MOVQ CX, R10
	SHLQ $2, R10
	// R13: the bytes between one tree's leaves and the next's.
	SHLQ $2, R13

row:
	TESTQ SI, SI
	JZ summed
	VMOVUPS.Z (DI), K1, Z1
	MOVQ AX, R11
	XORQ CX, CX

tree:
	CMPQ CX, R12
	JGE added
	MOVL (R11), R8
	MOVQ (BX)(CX*8), R9
	MOVLQSX (R9)(R8*4), R9
	IMULQ R10, R9
	ADDQ (DX)(CX*8), R9
	VMOVUPS.Z (R9), K1, Z0
	VADDPS Z0, Z1, Z1
	ADDQ R13, R11
	INCQ CX
	JMP tree

added:
	VMOVUPS Z1, K1, (DI)
	ADDQ $4, AX
	ADDQ R10, DI
	DECQ SI
	JMP row

summed:
	VZEROUPPER
	RET

// func code512(keys *int32, nkeys int, vals *float32, n int, out *uint8)
//
// Codes n values as EdgeKeys.Code does, sixteen at a time: the same
// branchless binary search over the keys (nkeys ≥ 1), its loads gathered.
TEXT ·code512(SB), NOSPLIT, $0-40
	MOVQ keys+0(FP), AX
	MOVQ nkeys+8(FP), DX
	MOVQ vals+16(FP), BX
	MOVQ n+24(FP), SI
	MOVQ out+32(FP), DI
	MOVL $0x7fffffff, R8
	VPBROADCASTD R8, Z31
	MOVL $1, R8
	VPBROADCASTD R8, Z30
	VPXORD Z29, Z29, Z29

block:
	TESTQ SI, SI
	JLE coded
	// K1: the block's values (sixteen, or the rest).
	MOVQ $-1, R8
	CMPQ SI, $16
	JGE full
	MOVQ SI, CX
	MOVL $1, R8
	SHLL CX, R8
	DECL R8

full:
	KMOVW R8, K1
	VMOVUPS.Z (BX), K1, Z0
	// K2: NaN, code 0. Otherwise each value's order key (orderKey).
	VCMPPS $3, Z0, Z0, K2
	VADDPS Z29, Z0, Z0
	VPSRAD $31, Z0, Z1
	VPANDD Z31, Z1, Z1
	VPXORD Z0, Z1, Z1
	VPXORD Z3, Z3, Z3
	MOVQ DX, R9

halve:
	CMPQ R9, $1
	JLE last
	MOVQ R9, R10
	SHRQ $1, R10
	VPBROADCASTD R10, Z4
	VPADDD Z3, Z4, Z5
	KXNORW K3, K3, K3
	VPGATHERDD (AX)(Z5*4), K3, Z6
	// The upper half where its first key is below the value.
	VPCMPGTD Z6, Z1, K4
	VPADDD Z4, Z3, K4, Z3
	SUBQ R10, R9
	JMP halve

last:
	KXNORW K3, K3, K3
	VPGATHERDD (AX)(Z3*4), K3, Z6
	VPCMPGTD Z6, Z1, K4
	VPADDD Z30, Z3, K4, Z3
	VPADDD Z30, Z3, Z3
	VPXORD Z3, Z3, K2, Z3
	VPMOVDB Z3, K1, (DI)
	ADDQ $64, BX
	ADDQ $16, DI
	SUBQ $16, SI
	JMP block

coded:
	VZEROUPPER
	RET
