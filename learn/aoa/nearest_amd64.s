#include "textflag.h"

// func nearest512(blocks *float64, nblocks, nf int, z *float64) float64
//
// The smallest squared distance from z to points held eight a block,
// feature by feature (blocks[(b*nf+f)*8+lane]): each lane sums its point's
// terms in feature order, as nearestBrute does, and a block stops once
// every lane's sum exceeds the best so far.
TEXT ·nearest512(SB), NOSPLIT, $0-40
	MOVQ blocks+0(FP), AX
	MOVQ nblocks+8(FP), CX
	MOVQ nf+16(FP), DX
	MOVQ z+24(FP), BX
	// Z31: the best so far in every lane, +Inf to start.
	MOVQ $0x7ff0000000000000, R8
	VPBROADCASTQ R8, Z31

block:
	TESTQ CX, CX
	JZ done
	VXORPD Z0, Z0, Z0
	MOVQ BX, R9
	MOVQ DX, R10

feature:
	TESTQ R10, R10
	JZ summed
	VBROADCASTSD (R9), Z1
	VSUBPD (AX), Z1, Z1
	VMULPD Z1, Z1, Z1
	VADDPD Z1, Z0, Z0
	ADDQ $64, AX
	ADDQ $8, R9
	DECQ R10
	// Every lane above the best: none of these points is nearer.
	VCMPPD $0x1e, Z31, Z0, K1
	KORTESTB K1, K1
	JCC feature
	SHLQ $6, R10
	ADDQ R10, AX
	DECQ CX
	JMP block

summed:
	// The best becomes the least of itself and the block's eight sums.
	VEXTRACTF64X4 $1, Z0, Y2
	VMINPD Y2, Y0, Y2
	VEXTRACTF128 $1, Y2, X3
	VMINPD X3, X2, X3
	VPERMILPD $1, X3, X4
	VMINPD X4, X3, X4
	VBROADCASTSD X4, Z5
	VMINPD Z5, Z31, Z31
	DECQ CX
	JMP block

done:
	VMOVSD X31, ret+32(FP)
	VZEROUPPER
	RET
