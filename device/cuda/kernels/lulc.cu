// lulc's CUDA kernels: the GPU twins of features.CPU, composite.Median and
// forest.Bins. Each must give the same bits as its Go reference, so every
// float operation is an explicitly rounded intrinsic (no contraction into
// FMA, IEEE division) and the order of operations follows the Go code.
// Compile with: nvcc -ptx --fmad=false -arch=compute_75 (see gen.sh).

#define NAN_F __int_as_float(0x7fc00000)

// nd is the normalised difference (a − b) / (a + b); NaN when a + b == 0.
// The quotient is computed either way and then chosen, so that the
// operation has no branch.
__device__ __forceinline__ float nd(float a, float b) {
    float den = __fadd_rn(a, b);
    float r = __fdiv_rn(__fsub_rn(a, b), den);
    return den == 0.0f ? NAN_F : r;
}

// Feature operations, as in features.Op. A context feature's plane is not
// the kernel's to write: its values come from its window's neighbourhood,
// computed before (context_* kernels or the host), and are put in place
// after.
enum { OP_BAND = 0, OP_ND = 1, OP_EVI = 2, OP_SAVI = 3, OP_BSI = 4, OP_CONTEXT = 5, OP_SHIFT = 6, OP_AFFINE = 7 };

// affine is a layer's map from its plane's value p to its units,
// float32(float32(p x a) + b), every NaN canonical (features.Affine).
__device__ __forceinline__ float affine(float p, float a, float b) {
    float r = __fadd_rn(__fmul_rn(p, a), b);
    return r != r ? NAN_F : r;
}

// apply_op is feature operation op on its inputs v as features.Feature's
// expression computes it (its value used only where none is NaN).
__device__ __forceinline__ float apply_op(int op, const float* v) {
    if (op == OP_BAND) return v[0];
    // A temporal plane of an index holds the value + 1 (composite.Temporal).
    if (op == OP_SHIFT) return __fsub_rn(v[0], 1.0f);
    if (op == OP_ND) return nd(v[0], v[1]);
    if (op == OP_EVI) {
        // 2.5 (n − r) / (n + 6 r − 7.5 b + 1)
        float den = __fadd_rn(__fsub_rn(__fadd_rn(v[0], __fmul_rn(6.0f, v[1])), __fmul_rn(7.5f, v[2])), 1.0f);
        float r = __fdiv_rn(__fmul_rn(2.5f, __fsub_rn(v[0], v[1])), den);
        return den == 0.0f ? NAN_F : r;
    }
    if (op == OP_SAVI) {
        // 1.5 (n − r) / (n + r + 0.5)
        float den = __fadd_rn(__fadd_rn(v[0], v[1]), 0.5f);
        float r = __fdiv_rn(__fmul_rn(1.5f, __fsub_rn(v[0], v[1])), den);
        return den == 0.0f ? NAN_F : r;
    }
    // bsi = nd(swir1 + red, nir + blue)
    return nd(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3]));
}

// OP_INPUTS is how many inputs operation op takes.
#define OP_INPUTS(op) ((op) == OP_BAND || (op) == OP_SHIFT || (op) == OP_AFFINE ? 1 : (op) == OP_EVI ? 3 : (op) == OP_BSI ? 4 : 2)
__device__ __forceinline__ int op_inputs(int op) { return OP_INPUTS(op); }

// op_value is feature operation op on its inputs v, every NaN canonical:
// NaN where an input is, as every operation's arithmetic carries a NaN
// operand through (IEEE 754), so no test of the inputs is needed.
__device__ __forceinline__ float op_value(int op, const float* v) {
    float r = apply_op(op, v);
    return r != r ? NAN_F : r;
}

// feature_run is one per-pixel feature of operation OP, known when
// compiled, for a thread's first npx of P pixels: pixel j's inputs are
// v0[j × pstride + position × stride] (p[1..]: the positions), its value
// goes to o[j × ostride]. The operation picked once per feature, not once
// per pixel, leaves a pixel only its loads, its arithmetic and its store.
// OP_AFFINE (a layer) takes its map's a and b from p[2] and p[3], as
// float bits.
template <int OP, int P>
__device__ __forceinline__ void feature_run(const float* v0, long long stride, int pstride, const int* p,
                                            float* __restrict__ o, long long ostride, int npx) {
    const int NI = OP_INPUTS(OP);
    long long at[NI];
#pragma unroll
    for (int k = 0; k < NI; k++) at[k] = p[1 + k] * stride;
#pragma unroll
    for (int j = 0; j < P; j++) {
        if (j < npx) {
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int k = 0; k < NI; k++) v[k] = v0[j * pstride + at[k]];
            if (OP == OP_AFFINE)
                o[j * ostride] = affine(v[0], __int_as_float(p[2]), __int_as_float(p[3]));
            else
                o[j * ostride] = op_value(OP, v);
        }
    }
}

// pixel_features writes the per-pixel features of a thread's first npx
// of P pixels, as prog (5 ints a feature: the operation and up to four
// input positions) computes them from their inputs (pixel j's at v0[j ×
// pstride + position × stride]), to out[at + o + j × ostride], at being
// planes[f] where PLANES (the feature's plane's offset), else f × n;
// context features are left. A NaN input gives NaN; every NaN out is
// canonical.
template <int P, bool PLANES>
__device__ __forceinline__ void pixel_features(const float* v0, long long stride, int pstride, const int* prog, int nfeat,
                                               const long long* planes, float* __restrict__ out, long long n,
                                               long long o, long long ostride, int npx) {
    for (int f = 0; f < nfeat; f++) {
        const int* p = prog + 5 * f;
        float* of = out + (PLANES ? planes[f] : f * n) + o;
        switch (p[0]) {
        case OP_BAND: feature_run<OP_BAND, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_SHIFT: feature_run<OP_SHIFT, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_AFFINE: feature_run<OP_AFFINE, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_ND: feature_run<OP_ND, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_EVI: feature_run<OP_EVI, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_SAVI: feature_run<OP_SAVI, P>(v0, stride, pstride, p, of, ostride, npx); break;
        case OP_BSI: feature_run<OP_BSI, P>(v0, stride, pstride, p, of, ostride, npx); break;
        default: break; // OP_CONTEXT: not this loop's to write
        }
    }
}

// features computes nfeat feature planes from nbands reflectance planes in
// one pass. prog holds 5 ints per feature: the operation and up to four
// input band positions. Each thread stages its pixel's bands in shared
// memory once, so every band is read from device memory once however many
// features use it. A NaN input gives NaN; every NaN out is canonical.
#define FEATURE_BLOCK 256
#define MAX_BANDS 16
extern "C" __global__ void __launch_bounds__(FEATURE_BLOCK) features(const float* __restrict__ bands, int nbands, long long n,
                                    const int* __restrict__ prog, int nfeat, float* __restrict__ out) {
    __shared__ float px[MAX_BANDS * FEATURE_BLOCK];
    __shared__ int sprog[5 * 64];
    for (int k = threadIdx.x; k < 5 * nfeat && k < 5 * 64; k += blockDim.x) sprog[k] = prog[k];
    __syncthreads();
    long long stride = (long long)gridDim.x * blockDim.x;
    // The kernel is bound by memory-level parallelism: all of a pixel's band
    // loads are issued before any is used, and the next pixel's are issued
    // before this one's features are computed, so each warp keeps up to
    // MAX_BANDS reads in flight while it computes.
    float bv[MAX_BANDS];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#pragma unroll
        for (int b = 0; b < MAX_BANDS; b++)
            if (b < nbands) bv[b] = bands[(long long)b * n + i];
    }
    for (; i < n; i += stride) {
        {
#pragma unroll
            for (int b = 0; b < MAX_BANDS; b++)
                if (b < nbands) px[b * FEATURE_BLOCK + threadIdx.x] = bv[b];
            long long next = i + stride;
            if (next < n) {
#pragma unroll
                for (int b = 0; b < MAX_BANDS; b++)
                    if (b < nbands) bv[b] = bands[(long long)b * n + next];
            }
            pixel_features<1, false>(px + threadIdx.x, FEATURE_BLOCK, 0, sprog, nfeat, nullptr, out, n, i, 0, 1);
        }
    }
}

// features_wide is features for more planes than the staging in shared
// memory holds (up to 64): each feature reads its inputs straight from
// device memory, where the cache serves the repeated reads. Same program,
// same arithmetic, same bits.
extern "C" __global__ void __launch_bounds__(FEATURE_BLOCK) features_wide(const float* __restrict__ bands, int nbands, long long n,
                                    const int* __restrict__ prog, int nfeat, float* __restrict__ out) {
    __shared__ int sprog[5 * 64];
    for (int k = threadIdx.x; k < 5 * nfeat && k < 5 * 64; k += blockDim.x) sprog[k] = prog[k];
    __syncthreads();
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        pixel_features<1, false>(bands + i, n, 0, sprog, nfeat, nullptr, out, n, i, 0, 1);
    }
}

// reflectance turns n digital numbers into reflectance as
// composite.Reflectance does: float32(dn) × scale rounded, then + offset
// rounded (two roundings, never a fused multiply-add), and the canonical
// NaN where dn is nodata.
extern "C" __global__ void reflectance(const unsigned short* __restrict__ dn, long long n, unsigned int nodata,
                                       float scale, float offset, float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned int v = dn[i];
        out[i] = v == nodata ? __int_as_float(0x7fc00000) : __fadd_rn(__fmul_rn((float)v, scale), offset);
    }
}

// Context features (features/context.go): statistics of a per-pixel value
// over the window around each pixel of a block's inner rectangle, the
// block carrying a halo cut at the tile's edges. Sums are of values
// clamped to [-4, 4] and quantised to multiples of 2^-18, in int64, so
// they are exact and their order does not matter; the CPU sums the same
// integers with running sums. Two passes: along rows, then along columns.

// ctx_quantise is a value that is not NaN, clamped and quantised, as an
// int (|q| <= 2^20), without the conversion unit: adding 1.5 x 2^23
// rounds |x| < 2^22 half to even onto the integers (as the CPU's
// math.RoundToEven), which are then the float's low bits.
__device__ __forceinline__ int ctx_quantise(float v) {
    v = fminf(fmaxf(v, -4.0f), 4.0f);
    return __float_as_int(__fadd_rn(__fmul_rn(v, 262144.0f), 12582912.0f)) - 0x4b400000;
}

// context_rows: for every row y of the w x h block v and inner column j
// (of iw, from x0), the sums and count of the non-NaN values of columns
// [x0+j-r, x0+j+r] cut to the block, and with extremes (for a range)
// their minimum and maximum. A thread per output: a warp's threads read
// neighbouring values, which the cache serves.
extern "C" __global__ void context_rows(const float* __restrict__ v, int w, int h, int x0, int iw, int r, int extremes,
                                        long long* __restrict__ s, long long* __restrict__ sq, int* __restrict__ cnt,
                                        float* __restrict__ lo, float* __restrict__ hi) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long total = (long long)h * iw;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int y = (int)(k / iw), c = x0 + (int)(k % iw);
        const float* row = v + (long long)y * w;
        long long S = 0, SQ = 0;
        int n = 0;
        float mn = __int_as_float(0x7f800000), mx = __int_as_float(0xff800000);
        for (int x = max(0, c - r); x <= min(w - 1, c + r); x++) {
            float val = row[x];
            if (val != val) continue;
            // |q| <= 2^20: a 32-bit product widened (mul.wide) is exact.
            int q = ctx_quantise(val);
            S += q;
            SQ += (long long)q * q;
            n++;
            mn = val < mn ? val : mn;
            mx = val > mx ? val : mx;
        }
        s[k] = S;
        sq[k] = SQ;
        cnt[k] = n;
        if (extremes) {
            lo[k] = mn;
            hi[k] = mx;
        }
    }
}

// ctx_mean is the mean of a window, S / N × 2^-18 rounded to float as
// features.Moments computes it through float64. Where |S| < 2^24, S and N
// are floats, and a quotient of floats rounded to float64 and then to
// float32 is the quotient rounded to float32 at once (double rounding is
// innocuous for division when 53 >= 2 × 24 + 2: Figueroa, "When is double
// rounding innocuous?", SIGNUM 1995; features.TestMeanFloatPath checks
// it): one float division, the scaling by 2^-18 exact in both.
__device__ __forceinline__ float ctx_mean(long long S, long long N) {
    if (S > -(1LL << 24) && S < (1LL << 24)) return __fmul_rn(__fdiv_rn((float)S, (float)N), 1.0f / 262144.0f);
    return __double2float_rn(__dmul_rn(__ddiv_rn(__ll2double_rn(S), __ll2double_rn(N)), 1.0 / 262144.0));
}

// ctx_quotient is s / N rounded to float64, as __ddiv_rn gives it, from
// rn = 1 / N rounded: q = s × rn is within 2 ulps of the quotient, the
// remainder s − qN is then exact in one fused multiply-add, and two of
// Markstein's corrections q + (s − qN) × rn make it faithful, then
// correctly rounded (Markstein, "Computation of elementary functions on
// the IBM RISC System/6000 processor", IBM J. Res. Dev. 34(1), 1990;
// features.TestMomentsReciprocal checks the same steps).
__device__ __forceinline__ double ctx_quotient(double s, double N, double rn) {
    double q = __dmul_rn(s, rn);
    q = __fma_rn(__fma_rn(-q, N, s), rn, q);
    return __fma_rn(__fma_rn(-q, N, s), rn, q);
}

// ctx_std is a window's standard deviation from its sums, count N > 0
// and Σq² (|Σq| < 2^30 and N <= 961 fit 32 bits), as features.Moments
// computes it.
__device__ __forceinline__ float ctx_std(int S, long long SQ, int N) {
    double s = __dsqrt_rn(__ll2double_rn(N * SQ - (long long)S * S));
    return __double2float_rn(__dmul_rn(__ddiv_rn(s, (double)N), 1.0 / 262144.0));
}

// ctx_moments writes a window's mean and standard deviation (to om[k] and
// os[k]; null: not wanted) from its sums, count and Σq², as
// features.Moments computes them.
__device__ __forceinline__ void ctx_moments(float* om, float* os, long long k, int S, long long SQ, int N) {
    if (om) om[k] = N == 0 ? NAN_F : ctx_mean(S, N);
    if (os) os[k] = N == 0 ? NAN_F : ctx_std(S, SQ, N);
}

// The moments of a whole window, of an odd count N, from rn = 1 / N
// rounded to float64 and scaled by 2^-18 (exactly: a power of two), and N
// scaled likewise (N18). The mean S / N, an integer over an odd one, is
// never a midpoint between floats and lies at least 2^-35 of itself from
// one, so S × rn (within 2^-52 of itself) rounds to float as the quotient
// does, directly or through float64; the std's quotient takes
// ctx_quotient, whose every step is the unscaled one's times 2^-18
// (features.TestMomentsReciprocal). Both then need no scaling after.
__device__ __forceinline__ float ctx_mean_whole(int S, double rn18) {
    return __double2float_rn(__dmul_rn(__int2double_rn(S), rn18));
}
__device__ __forceinline__ float ctx_std_whole(int S, long long SQ, int N, double N18, double rn18) {
    double s = __dsqrt_rn(__ll2double_rn(N * SQ - (long long)S * S));
    return __double2float_rn(ctx_quotient(s, N18, rn18));
}

// context_out writes one inner pixel's statistics from its window's sums,
// count and extremes, as features.Moments and max - min compute them.
__device__ __forceinline__ void context_out(float* out, long long n, long long k, long long S, long long SQ, long long N,
                                            float mn, float mx, int fmean, int fstd, int frange) {
    ctx_moments(fmean >= 0 ? out + fmean * n : nullptr, fstd >= 0 ? out + fstd * n : nullptr, k, (int)S, SQ, (int)N);
    if (frange >= 0) out[frange * n + k] = N == 0 ? NAN_F : __fsub_rn(mx, mn);
}

// context_cols: for every inner pixel (i, j) of ih x iw from row y0, the
// row results of rows [y0+i-r, y0+i+r] cut to the block's h rows, summed
// into the mean, the standard deviation and the range, written to the
// feature planes fmean, fstd and frange of out (planes of n pixels; -1:
// not wanted). A thread runs down CONTEXT_SEG rows of one column with
// running sums (exact: integers), its warp reading neighbouring columns;
// extremes, which do not run, are taken over each window.
#define CONTEXT_SEG 8
extern "C" __global__ void context_cols(const long long* __restrict__ s, const long long* __restrict__ sq,
                                        const int* __restrict__ cnt, const float* __restrict__ lo,
                                        const float* __restrict__ hi, int h, int y0, int ih, int iw, int r,
                                        float* __restrict__ out, long long n, int fmean, int fstd, int frange) {
    long long stride = (long long)gridDim.x * blockDim.x;
    int segs = (ih + CONTEXT_SEG - 1) / CONTEXT_SEG;
    long long total = (long long)segs * iw;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int j = (int)(k % iw), i0 = (int)(k / iw) * CONTEXT_SEG, i1 = min(ih, i0 + CONTEXT_SEG);
        long long S = 0, SQ = 0, N = 0;
        int y = y0 + i0;
        for (int yy = max(0, y - r); yy <= min(h - 1, y + r); yy++) {
            long long at = (long long)yy * iw + j;
            S += s[at];
            SQ += sq[at];
            N += cnt[at];
        }
        for (int i = i0; i < i1; i++) {
            y = y0 + i;
            if (i > i0) {
                int in = y + r, gone = y - r - 1;
                if (in < h) {
                    long long at = (long long)in * iw + j;
                    S += s[at];
                    SQ += sq[at];
                    N += cnt[at];
                }
                if (gone >= 0) {
                    long long at = (long long)gone * iw + j;
                    S -= s[at];
                    SQ -= sq[at];
                    N -= cnt[at];
                }
            }
            float mn = __int_as_float(0x7f800000), mx = __int_as_float(0xff800000);
            if (frange >= 0) {
                for (int yy = max(0, y - r); yy <= min(h - 1, y + r); yy++) {
                    long long at = (long long)yy * iw + j;
                    mn = lo[at] < mn ? lo[at] : mn;
                    mx = hi[at] > mx ? hi[at] : mx;
                }
            }
            context_out(out, n, (long long)i * iw + j, S, SQ, N, mn, mx, fmean, fstd, frange);
        }
    }
}

// features_context is the whole features pass of a window with context
// features, for a CONTEXT_TILE² tile of inner pixels per block, from the
// block's digital numbers (nb planes of w x h, the inner iw x ih from
// (x0, y0)): nothing between the DNs read and the feature planes written
// goes through device memory.
//
// A grid of (nbase + 1, tiles across, tiles down) blocks: block b <
// nbase of a tile is base feature b (bprog: 5 ints, the operation and its
// input planes). If cprog[4b] = R >= 0 (its largest radius; -1: the base
// is left to context_rows and context_cols), the tile's base values with
// a halo of R are computed from their DNs (reflectance, then the
// operation, as the reflectance and features kernels do; values beyond
// the block are missing, as the tile's edge cuts windows) and quantised
// into shared memory, the values kept too where cprog[4b+1] is 1 (a
// window wants a range) (base_values). Then for each of its cprog[4b+3]
// windows (pprog from cprog[4b+2]: 4 ints each, the radius and the mean,
// std and range feature planes, -1 where not wanted; window_pair): the
// row sums of every row the tile's windows touch, then the column sums
// of those, both as running sums over runs of CTX_ROW_SEG and
// CTX_COL_SEG outputs (integers: exact in any order; without a missing
// value in the tile, counts are left out and a window's mean and std
// divide by the reciprocal of its size), and a range's row extremes,
// then column extremes (run_extremes), into the feature planes of out (n
// pixels each).
//
// Block nbase of a tile: its per-pixel features (fprog: the features
// kernel's program, packed without the context features), chunk pixels
// at a time (CONTEXT_PIXELS a thread where their planes fit), each
// pixel's reflectance staged in shared memory once.
//
// Shared memory, dynamic: the largest of the bases' (the quantised values
// and, with a range, the values, side rows of side | 1 each; then rows x
// CTX_RP row results of 12 bytes: a sum, and the count with the sum of
// squares) and nb x chunk floats; static: the per-pixel program.
#define CONTEXT_TILE 32
// The row stride of features_context's row results (sums, extremes).
#define CTX_RP (CONTEXT_TILE + 1)
// The pixels a thread of features_context takes at once for the
// per-pixel features, where their planes fit in shared memory (256
// threads): more share the program's reading among more pixels, fewer
// leave shared memory for more blocks.
#ifndef CONTEXT_PIXELS
#define CONTEXT_PIXELS 4
#endif
// A thread's run of outputs in features_context's row and column sums:
// longer runs start fewer windows from scratch, shorter ones share a
// tile's rows among more threads (4 and 4 were the fastest measured).
#ifndef CTX_ROW_SEG
#define CTX_ROW_SEG 4
#endif
#ifndef CTX_COL_SEG
#define CTX_COL_SEG 4
#endif
// A thread's run of outputs down columns in a range of radius 3 or more.
#ifndef CTX_RANGE_RUN
#define CTX_RANGE_RUN 8
#endif
// u16_float is float(v) for a 16-bit v, exactly, without the conversion
// unit (a quarter of the arithmetic units' rate): 2^23 + v is a float
// whose low mantissa bits are v.
__device__ __forceinline__ float u16_float(unsigned int v) {
    return __fsub_rn(__int_as_float(0x4b000000 | v), 8388608.0f);
}
// refl_of is a DN's reflectance, NaN for nodata: computed either way and
// then chosen, so that no branch or predicate guards the arithmetic.
__device__ __forceinline__ float refl_of(unsigned int v, unsigned int nodata, float scale, float offset) {
    float r = __fadd_rn(__fmul_rn(u16_float(v), scale), offset);
    return v == nodata ? NAN_F : r;
}

// base_values fills features_context's shared tile of a base of operation
// OP, known when compiled (bp: its program), side x side from the block's
// (bx, by): each value from its DNs (reflectance, then the operation, as
// the reflectance and features kernels do; values beyond the block are
// missing, as the tile's edge cuts windows), quantised into q
// (CTX_MISSING where NaN) and, for a range (values), kept in fv. EDGE:
// whether the tile may reach beyond the block (else its reads need no
// bounds). It reports whether any of the thread's values is missing.
#define CTX_MISSING ((int)0x80000000)
// The rows a thread of base_values reads at once.
#ifndef CTX_HALO_ROWS
#define CTX_HALO_ROWS 4
#endif
template <int OP, bool EDGE>
__device__ __forceinline__ bool base_values(const unsigned short* __restrict__ dn, const int* bp, long long ph, int w, int h,
                                            int bx, int by, int side, int pitch, unsigned int nodata, float scale,
                                            float offset, int values, int* q, float* fv) {
    const int NI = OP_INPUTS(OP), U = CTX_HALO_ROWS;
    // Offsets into dn are 32-bit (the host keeps a block's DNs below
    // 2^32): one multiply-add to an address, not four.
    unsigned int in[NI];
#pragma unroll
    for (int i = 0; i < NI; i++) in[i] = (unsigned int)bp[1 + i] * (unsigned int)ph;
    // A thread walks one column of the tile, lx, down every rstep-th row
    // from ly, U rows a round: their DNs are all read before any is used.
    // At an edge, a read beyond the block is of its nearest pixel, the
    // value then missing, so that the round has no branch.
    const int rstep = blockDim.x / side; // side <= 62: at least 4 rows
    int ly = threadIdx.x / side, lx = threadIdx.x % side;
    bool gap = false;
    if (ly >= rstep) return gap; // the threads past rstep whole rows
    int gx = bx + lx;
    bool xin = gx >= 0 && gx < w;
    int cx = EDGE ? min(max(gx, 0), w - 1) : gx;
    const unsigned int astep = (unsigned int)rstep * w;
    unsigned int row = (unsigned int)(by + ly) * w + cx;
    for (; ly < side; ly += U * rstep, row += U * astep) {
        unsigned int d[U][NI];
#pragma unroll
        for (int u = 0; u < U; u++) {
            unsigned int at = EDGE ? (unsigned int)min(max(by + ly + u * rstep, 0), h - 1) * w + cx : row + u * astep;
            bool read = EDGE || ly + u * rstep < side;
#pragma unroll
            for (int i = 0; i < NI; i++) d[u][i] = read ? dn[in[i] + at] : 0;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int y = ly + u * rstep, gy = by + y;
            if (y < side) {
                float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int i = 0; i < NI; i++) v[i] = refl_of(d[u][i], nodata, scale, offset);
                float val = op_value(OP, v);
                if (EDGE && !(xin && gy >= 0 && gy < h)) val = NAN_F;
                bool miss = val != val;
                gap = gap || miss;
                int k = y * pitch + lx;
                q[k] = miss ? CTX_MISSING : ctx_quantise(val);
                if (values) fv[k] = val;
            }
        }
    }
    return gap;
}

// base_fill is base_values for a tile inside the block or at its edge.
template <int OP>
__device__ __forceinline__ bool base_fill(const unsigned short* __restrict__ dn, const int* bp, long long ph, int w, int h,
                                          int bx, int by, int side, int pitch, unsigned int nodata, float scale,
                                          float offset, int values, int* q, float* fv) {
    if (bx >= 0 && by >= 0 && bx + side <= w && by + side <= h)
        return base_values<OP, false>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv);
    return base_values<OP, true>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv);
}

// A window's count and sum of squares travel as one integer: n << 50 |
// Σq². Σq² <= 31² x 2^40 < 2^50 and n <= 961 < 2^13, and sums of these
// are exact (carries never cross), so one 64-bit sum carries both.
#define CTX_N_SHIFT 50
#define CTX_SQ_MASK ((1LL << CTX_N_SHIFT) - 1)

// run_extremes gives the G outputs j of a run their window's minimum and
// maximum, of vlo[(j + d) × stride] and vhi[(j + d) × stride] for d in
// [−r, r], NaN passed over (+inf and −inf where all are NaN): the part
// every window holds, [G − 1 − r, r], is taken once, and the rest by a
// walk to the left and one to the right. G <= 2r + 2.
template <int G>
__device__ __forceinline__ void run_extremes(const float* vlo, const float* vhi, int stride, int r, float* lo, float* hi) {
    const float inf = __int_as_float(0x7f800000);
    float clo = inf, chi = -inf;
    for (int x = G - 1 - r; x <= r; x++) {
        clo = fminf(clo, vlo[x * stride]);
        chi = fmaxf(chi, vhi[x * stride]);
    }
    // Output j's window less the common part: [j − r, G − 2 − r] to the
    // left, [r + 1, j + r] to the right.
    float a = inf, z = -inf;
    lo[G - 1] = clo;
    hi[G - 1] = chi;
#pragma unroll
    for (int j = G - 2; j >= 0; j--) {
        a = fminf(a, vlo[(j - r) * stride]);
        z = fmaxf(z, vhi[(j - r) * stride]);
        lo[j] = fminf(clo, a);
        hi[j] = fmaxf(chi, z);
    }
    a = inf;
    z = -inf;
#pragma unroll
    for (int j = 1; j < G; j++) {
        a = fminf(a, vlo[(j + r) * stride]);
        z = fmaxf(z, vhi[(j + r) * stride]);
        lo[j] = fminf(lo[j], a);
        hi[j] = fmaxf(hi[j], z);
    }
}

// range_rows: the extremes along rows of features_context's values fv
// (rows pitch apart, the tile's corner at (R, R)) over radius r, for the
// rows rows of the windows of a tile, into rlo and rhi (rows x CTX_RP).
template <int G>
__device__ __forceinline__ void range_rows(const float* fv, int pitch, int R, int r, int rows, float* rlo, float* rhi) {
    const int T = CONTEXT_TILE;
    for (int k = threadIdx.x; k < rows * (T / G); k += blockDim.x) {
        int lr = k / (T / G), c0 = k % (T / G) * G;
        const float* v = fv + (R - r + lr) * pitch + R + c0;
        float lo[G], hi[G];
        run_extremes<G>(v, v, 1, r, lo, hi);
#pragma unroll
        for (int j = 0; j < G; j++) {
            rlo[lr * CTX_RP + c0 + j] = lo[j];
            rhi[lr * CTX_RP + c0 + j] = hi[j];
        }
    }
}

// range_cols: the extremes down columns of the row extremes, max − min
// into feature plane of for the tile's inner pixels.
template <int G>
__device__ __forceinline__ void range_cols(const float* rlo, const float* rhi, int r, float* of, int tx0, int ty0, int iw,
                                           int ih) {
    const int T = CONTEXT_TILE;
    for (int k = threadIdx.x; k < T * (T / G); k += blockDim.x) {
        int c = k % T, ly0 = k / T * G;
        float lo[G], hi[G];
        run_extremes<G>(rlo + (ly0 + r) * CTX_RP + c, rhi + (ly0 + r) * CTX_RP + c, CTX_RP, r, lo, hi);
        int x = tx0 + c, y = ty0 + ly0;
        int rows = x < iw ? min(G, ih - y) : 0;
        float* o = of + (long long)y * iw + x;
#pragma unroll
        for (int j = 0; j < G; j++) {
            // max − min is never −0 on the CPU, whichever zeros min and
            // max picked.
            float d = lo[j] > hi[j] ? NAN_F : __fsub_rn(hi[j], lo[j]);
            if (j < rows) *o = d == 0.0f ? 0.0f : d;
            o += iw;
        }
    }
}

// row_sums: the sums along rows of features_context's quantised values q
// (rows pitch apart, the tile's corner at (R, R)) over radius r, for the
// rows rows of the windows of a tile, into rs (Σq) and re (n << 50 |
// Σq²), rows x CTX_RP: a thread runs along CTX_ROW_SEG columns, its
// windows' sums running. GAPS: whether q may hold CTX_MISSING; without,
// every window holds 2r + 1 values, and re holds Σq² alone.
template <bool GAPS>
__device__ __forceinline__ void row_sums(const int* q, int pitch, int R, int r, int rows, int* rs, long long* re) {
    const int T = CONTEXT_TILE, SEG = CTX_ROW_SEG;
    for (int k = threadIdx.x; k < rows * (T / SEG); k += blockDim.x) {
        int lr = k / (T / SEG), c0 = k % (T / SEG) * SEG;
        const int* row = q + (R - r + lr) * pitch + R - r + c0;
        int S = 0;
        long long E = 0;
        for (int dx = 0; dx <= 2 * r; dx++) {
            int qv = row[dx];
            bool ok = !GAPS || qv != CTX_MISSING;
            qv = ok ? qv : 0;
            S += qv;
            E += (long long)qv * qv;
            if (GAPS && ok) E += 1LL << CTX_N_SHIFT;
        }
        int at = lr * CTX_RP + c0;
        rs[at] = S;
        re[at] = E;
#pragma unroll
        for (int c = 1; c < SEG; c++) {
            int a = row[c + 2 * r], g = row[c - 1];
            if (GAPS) {
                bool aok = a != CTX_MISSING, gok = g != CTX_MISSING;
                a = aok ? a : 0;
                g = gok ? g : 0;
                E += (long long)((int)aok - (int)gok) * (1LL << CTX_N_SHIFT);
            }
            S += a - g;
            E += (long long)a * a - (long long)g * g;
            rs[at + c] = S;
            re[at + c] = E;
        }
    }
}

// col_moments: the sums down columns of features_context's row results
// (rs, re: rows x CTX_RP, as row_sums leaves them) over 2r + 1 rows,
// and from them the mean and std of the tile's inner pixels into the
// feature planes om and os (MEAN, STD: which are wanted). A thread runs
// down CTX_COL_SEG rows of one column, a warp's threads on neighbouring
// columns (its writes coalesce). GAPS as in row_sums; without, every
// window holds (2r + 1)² values, an odd count, and its moments take the
// reciprocal (ctx_mean_whole, ctx_std_whole).
template <bool GAPS, bool MEAN, bool STD>
__device__ __forceinline__ void col_moments(const int* rs, const long long* re, int r, float* om, float* os, int tx0,
                                            int ty0, int iw, int ih) {
    const int T = CONTEXT_TILE, CS = CTX_COL_SEG;
    const int span = 2 * r + 1, N = span * span;
    // Double division is correctly rounded on the device, and folded as
    // such where the radius is known when compiled.
    const double N18 = (double)N * 262144.0, rn18 = GAPS ? 0.0 : (1.0 / 262144.0) / (double)N;
    for (int k = threadIdx.x; k < T * (T / CS); k += blockDim.x) {
        int c = k % T, ly0 = k / T * CS;
        const int* rp = rs + ly0 * CTX_RP + c;
        const long long* ep = re + ly0 * CTX_RP + c;
        int S = 0;
        long long E = 0;
        for (int dy = 0; dy < span; dy++) {
            S += rp[dy * CTX_RP];
            E += ep[dy * CTX_RP];
        }
        int x = tx0 + c, y = ty0 + ly0;
        int rows = x < iw ? min(CS, ih - y) : 0;
        long long o = (long long)y * iw + x;
        float *pm = MEAN ? om + o : nullptr, *ps = STD ? os + o : nullptr;
#pragma unroll
        for (int j = 0; j < CS; j++) {
            if (j > 0) {
                S += rp[(j + 2 * r) * CTX_RP] - rp[(j - 1) * CTX_RP];
                E += ep[(j + 2 * r) * CTX_RP] - ep[(j - 1) * CTX_RP];
            }
            if (j < rows) {
                if (GAPS) {
                    int n = (int)(E >> CTX_N_SHIFT);
                    if (MEAN) *pm = n == 0 ? NAN_F : ctx_mean(S, n);
                    if (STD) *ps = n == 0 ? NAN_F : ctx_std(S, E & CTX_SQ_MASK, n);
                } else {
                    if (MEAN) *pm = ctx_mean_whole(S, rn18);
                    if (STD) *ps = ctx_std_whole(S, E, N, N18, rn18);
                }
            }
            if (MEAN) pm += iw;
            if (STD) ps += iw;
        }
    }
}

// col_pick calls col_moments for the planes wanted (om, os; null: not).
template <bool GAPS>
__device__ __forceinline__ void col_pick(const int* rs, const long long* re, int r, float* om, float* os, int tx0,
                                         int ty0, int iw, int ih) {
    if (om && os)
        col_moments<GAPS, true, true>(rs, re, r, om, os, tx0, ty0, iw, ih);
    else if (om)
        col_moments<GAPS, true, false>(rs, re, r, om, os, tx0, ty0, iw, ih);
    else
        col_moments<GAPS, false, true>(rs, re, r, om, os, tx0, ty0, iw, ih);
}

// window_pair computes one window of a base in features_context: its
// row sums, then column sums and moments (into om and os), and its range
// (into orng; each null where not wanted), over radius RC where RC > 0,
// known when compiled (so that the loops over a window unroll and its
// offsets are constants), else rr.
template <int RC>
__device__ __forceinline__ void window_pair(const int* q, const float* fv, int pitch, int R, int rr, bool gap, float* om,
                                            float* os, float* orng, int* rs, long long* re, float* rlo, float* rhi,
                                            int tx0, int ty0, int iw, int ih) {
    const int r = RC > 0 ? RC : rr, rows = CONTEXT_TILE + 2 * r;
    if (om || os) {
        // Row sums: output (lr, c) is the window of shared column R + c in
        // shared row R - r + lr.
        if (gap)
            row_sums<true>(q, pitch, R, r, rows, rs, re);
        else
            row_sums<false>(q, pitch, R, r, rows, rs, re);
        __syncthreads();
        if (gap)
            col_pick<true>(rs, re, r, om, os, tx0, ty0, iw, ih);
        else
            col_pick<false>(rs, re, r, om, os, tx0, ty0, iw, ih);
        __syncthreads();
    }
    if (orng) {
        // Range, separably: the row extremes of every row the tile's
        // windows touch, then the extremes of those down each column, a
        // thread taking a run of outputs whose windows share most of their
        // values (run_extremes). Runs of 4 along rows share the rows among
        // more threads (measured faster than 8); down columns, runs of 8
        // where the window allows.
        range_rows<4>(fv, pitch, R, r, rows, rlo, rhi);
        __syncthreads();
        if (r >= 3)
            range_cols<CTX_RANGE_RUN>(rlo, rhi, r, orng, tx0, ty0, iw, ih);
        else
            range_cols<4>(rlo, rhi, r, orng, tx0, ty0, iw, ih);
        __syncthreads();
    }
}

// Five blocks a multiprocessor (48 registers a thread), as many as the
// shared memory of the default set takes, hide more of the latency of
// the DN reads and the barriers than the four that the registers the
// compiler would otherwise take (61) allow; six (40 registers) spill.
#ifndef CTX_MIN_BLOCKS
#define CTX_MIN_BLOCKS 5
#endif
extern "C" __global__ void __launch_bounds__(256, CTX_MIN_BLOCKS) features_context(
    const unsigned short* __restrict__ dn, int nb, int w, int h, int x0, int y0, int iw, int ih, unsigned int nodata,
    float scale, float offset, const int* __restrict__ bprog, int nbase, const int* __restrict__ cprog,
    const int* __restrict__ pprog, const int* __restrict__ fprog, int nfeat, int chunk, float* __restrict__ out,
    long long n) {
    extern __shared__ long long smem[];
    __shared__ int sprog[5 * 64];
    const int T = CONTEXT_TILE;
    const long long ph = (long long)w * h;
    // A tile's blocks, one per base (b < nbase: the base's windows) and
    // one for the per-pixel features (b = nbase), smaller than a tile's
    // whole pass so that the last wave of blocks is a small part of the
    // kernel's time. The grid's x index picks the block of the tile, so
    // a tile's blocks are consecutive in the grid's order: blocks of every
    // kind run side by side (the per-pixel blocks wait on memory, the
    // bases' on arithmetic) and a tile's DNs are read while the L2 cache
    // holds them, 3-5 % faster than a base per z index (measured, H100).
    int b = blockIdx.x, tx0 = blockIdx.y * T, ty0 = blockIdx.z * T;
    if (b < nbase) {
        int R = cprog[4 * b], values = cprog[4 * b + 1];
        if (R < 0) return;
        const int* pp = pprog + cprog[4 * b + 2];
        int npairs = cprog[4 * b + 3];
        // Rows of the shared tile are an odd number of words apart, and
        // rows of the row results CTX_RP: a warp's runs, four columns
        // apart along a row and spread over four rows, then meet every
        // bank once.
        int side = T + 2 * R, pitch = side | 1;
        // Shared memory: the quantised values, the values (for a range),
        // then the row results: Σq (int) and n << 50 | Σq² (long long),
        // or for a range the row minima and maxima (floats) in their place.
        int* q = (int*)smem;
        float* fv = (float*)(q + side * pitch);
        long long* re = smem + (side * pitch * (1 + values) + 1) / 2;
        int* rs = (int*)(re + (T + 2 * R) * CTX_RP);
        float *rlo = (float*)re, *rhi = rlo + (T + 2 * R) * CTX_RP;
        // The windows' program, read while the tile fills (a base's
        // windows, at most 15, fit the per-pixel program's space).
        for (int k = threadIdx.x; k < 4 * npairs && k < 5 * 64; k += blockDim.x) sprog[k] = pp[k];
        int bx = x0 + tx0 - R, by = y0 + ty0 - R; // the shared tile's corner in the block
        const int* bp = bprog + 5 * b;
        bool gap = false;
        switch (bp[0]) {
        case OP_BAND: gap = base_fill<OP_BAND>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        case OP_SHIFT: gap = base_fill<OP_SHIFT>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        case OP_ND: gap = base_fill<OP_ND>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        case OP_EVI: gap = base_fill<OP_EVI>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        case OP_SAVI: gap = base_fill<OP_SAVI>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        default: gap = base_fill<OP_BSI>(dn, bp, ph, w, h, bx, by, side, pitch, nodata, scale, offset, values, q, fv); break;
        }
        // Without a missing value in the shared tile every window is
        // whole: the sums need not count.
        gap = __syncthreads_or(gap);
        for (int p = 0; p < npairs; p++) {
            int r = sprog[4 * p], fmean = sprog[4 * p + 1], fstd = sprog[4 * p + 2], frange = sprog[4 * p + 3];
            float *om = fmean >= 0 ? out + fmean * n : nullptr, *os = fstd >= 0 ? out + fstd * n : nullptr;
            float* orng = frange >= 0 ? out + frange * n : nullptr;
            // The windows of 3, 7 and 15 px (those of lulc's configs) with
            // their radius known when compiled; the rest take it as it
            // comes, with the same arithmetic.
            switch (r) {
            case 1: window_pair<1>(q, fv, pitch, R, r, gap, om, os, orng, rs, re, rlo, rhi, tx0, ty0, iw, ih); break;
            case 3: window_pair<3>(q, fv, pitch, R, r, gap, om, os, orng, rs, re, rlo, rhi, tx0, ty0, iw, ih); break;
            case 7: window_pair<7>(q, fv, pitch, R, r, gap, om, os, orng, rs, re, rlo, rhi, tx0, ty0, iw, ih); break;
            default: window_pair<0>(q, fv, pitch, R, r, gap, om, os, orng, rs, re, rlo, rhi, tx0, ty0, iw, ih); break;
            }
        }
    }
    if (b != nbase) return;
    // The per-pixel features of the tile's inner pixels, each pixel's
    // reflectance staged in shared memory once. The program is kept
    // without the context features (which are the bases' blocks' to
    // write), each feature with its plane's offset: warp 0 packs it.
    __shared__ long long splane[64];
    __shared__ int sfeat;
    if (threadIdx.x < 32) {
        int m = 0;
        for (int f0 = 0; f0 < nfeat && f0 < 64; f0 += 32) {
            int f = f0 + threadIdx.x;
            bool keep = f < nfeat && f < 64 && fprog[5 * f] != OP_CONTEXT;
            unsigned int ball = __ballot_sync(0xffffffffu, keep);
            if (keep) {
                int at = m + __popc(ball & ((1u << threadIdx.x) - 1));
                for (int i = 0; i < 5; i++) sprog[5 * at + i] = fprog[5 * f + i];
                splane[at] = f * n;
            }
            m += __popc(ball);
        }
        if (threadIdx.x == 0) sfeat = m;
    }
    __syncthreads();
    const int npix = sfeat;
    // A thread reads only what it staged: no barrier.
    float* px = (float*)smem;
    if (chunk >= CONTEXT_PIXELS * 256) {
        // Rounds of CONTEXT_PIXELS pixels a thread, STEP apart (rows ly,
        // ly + ROWS, ... of column c): the program is read and its
        // operations picked once for them all, and a band's DNs of the
        // round are read at once.
        const int P = CONTEXT_PIXELS, STEP = 256, ROWS = STEP / T;
        int ly = threadIdx.x / T, c = threadIdx.x % T;
        for (int k0 = 0; k0 < T * T; k0 += P * STEP, ly += P * ROWS) {
            int npx = tx0 + c < iw ? min(P, max(0, (ih - ty0 - ly + ROWS - 1) / ROWS)) : 0;
            unsigned int at = (unsigned int)(y0 + ty0 + ly) * w + x0 + tx0 + c;
            for (int b = 0; b < nb; b++, at += (unsigned int)ph) {
                unsigned int v[P];
#pragma unroll
                for (int j = 0; j < P; j++) v[j] = j < npx ? dn[at + j * ROWS * w] : nodata;
#pragma unroll
                for (int j = 0; j < P; j++) px[b * P * STEP + j * STEP + threadIdx.x] = refl_of(v[j], nodata, scale, offset);
            }
            pixel_features<P, true>(px + threadIdx.x, P * STEP, STEP, sprog, npix, splane, out, n,
                              (long long)(ty0 + ly) * iw + tx0 + c, (long long)ROWS * iw, npx);
        }
        return;
    }
    // Chunk pixels at a time, one a thread, when the tile's planes would
    // not fit in shared memory.
    for (int k0 = 0; k0 < T * T; k0 += chunk) {
        int k = k0 + threadIdx.x, ly = k / T, c = k % T;
        if (threadIdx.x >= chunk || k >= T * T || ty0 + ly >= ih || tx0 + c >= iw) continue;
        long long at = (long long)(y0 + ty0 + ly) * w + x0 + tx0 + c;
        for (int b = 0; b < nb; b++) px[b * chunk + threadIdx.x] = refl_of(dn[b * ph + at], nodata, scale, offset);
        pixel_features<1, true>(px + threadIdx.x, chunk, 0, sprog, npix, splane, out, n, (long long)(ty0 + ly) * iw + tx0 + c, 0,
                          1);
    }
}

// context_at computes context features at chosen pixels of a w x h tile
// held on the device (dn: its band planes; refl: every DN's reflectance,
// as the host's table gives it), straight from each window: a thread per
// pixel and feature. prog holds 7 ints per context feature: the base
// operation, its four input bands, the window radius and the statistic
// (0 mean, 1 std, 2 range). out gets nctx values per pixel. The twin of
// features.Set.ContextAt.
extern "C" __global__ void context_at(const unsigned short* __restrict__ dn, int w, int h, const float* __restrict__ refl,
                                      const int* __restrict__ xs, const int* __restrict__ ys, long long npix,
                                      const int* __restrict__ prog, int nctx, float* __restrict__ out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long plane = (long long)w * h;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < npix * nctx; t += stride) {
        long long p = t / nctx;
        int k = (int)(t % nctx);
        const int* pr = prog + 7 * k;
        int op = pr[0], r = pr[5], stat = pr[6], ninputs = op_inputs(op);
        int x = xs[p], y = ys[p];
        long long S = 0, SQ = 0, N = 0;
        float mn = __int_as_float(0x7f800000), mx = __int_as_float(0xff800000);
        for (int yy = max(0, y - r); yy <= min(h - 1, y + r); yy++) {
            for (int xx = max(0, x - r); xx <= min(w - 1, x + r); xx++) {
                long long i = (long long)yy * w + xx;
                float v[4];
#pragma unroll
                for (int b = 0; b < 4; b++) v[b] = b < ninputs ? refl[dn[pr[1 + b] * plane + i]] : 0.0f;
                float val = op_value(op, v);
                if (val != val) continue;
                long long q = ctx_quantise(val);
                S += q;
                SQ += q * q;
                N++;
                mn = val < mn ? val : mn;
                mx = val > mx ? val : mx;
            }
        }
        context_out(out, 1, p * nctx + k, S, SQ, N, mn, mx, stat == 0 ? 0 : -1, stat == 1 ? 0 : -1, stat == 2 ? 0 : -1);
    }
}

// affine_plane maps n values of a context feature of a layer, in place,
// to the layer's units (features.Affine: a and b its map for a mean; |a|
// and 0 for a spread).
extern "C" __global__ void affine_plane(float* __restrict__ v, long long n, float a, float b) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) v[i] = affine(v[i], a, b);
}

// crop copies the inner iw x ih rectangle from (x0, y0) of nplanes planes
// of a w x h block into planes of iw x ih.
extern "C" __global__ void crop(const float* __restrict__ src, int w, int h, int x0, int y0, int iw, int ih, int nplanes,
                                float* __restrict__ dst) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long plane = (long long)iw * ih;
    long long total = plane * nplanes;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        long long b = k / plane, p = k % plane;
        int i = (int)(p / iw), j = (int)(p % iw);
        dst[k] = src[b * w * h + (long long)(y0 + i) * w + x0 + j];
    }
}

// median_of is the median of v's k values, sorted: the middle one, or the
// mean of the middle two (NaN when that sum is ∞ + −∞), NaN for none.
__device__ __forceinline__ float median_of(const float* v, int k) {
    if (k == 0) return NAN_F;
    if (k % 2 == 1) return v[k / 2];
    float m = __fmul_rn(__fadd_rn(v[k / 2 - 1], v[k / 2]), 0.5f);
    return m == m ? m : NAN_F;
}

// median_strided is median_of over v[j × stride], j < k.
__device__ __forceinline__ float median_strided(const float* v, int stride, int k) {
    if (k == 0) return NAN_F;
    if (k % 2 == 1) return v[(k / 2) * stride];
    float m = __fmul_rn(__fadd_rn(v[(k / 2 - 1) * stride], v[(k / 2) * stride]), 0.5f);
    return m == m ? m : NAN_F;
}

// median writes per pixel the median of the non-NaN values over ndates
// planes (dates[d * n + i]) and their count. Values keep date order among
// equals (a stable insertion sort), as composite.Median does.
extern "C" __global__ void median(const float* __restrict__ dates, int ndates, long long n,
                                  float* __restrict__ out, unsigned char* __restrict__ count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float buf[64];
        int k = 0;
        for (int d = 0; d < ndates; d++) {
            float x = dates[(long long)d * n + i];
            if (x != x) continue;
            int j = k;
            while (j > 0 && buf[j - 1] > x) {
                buf[j] = buf[j - 1];
                j--;
            }
            buf[j] = x;
            k++;
        }
        out[i] = median_of(buf, k);
        if (count) count[i] = (unsigned char)k;
    }
}

// bin codes feature planes: code 0 for NaN, else 1 + the index of the first
// edge >= v. edges holds every feature's edges back to back, starting at
// offsets[f] with lengths[f].
extern "C" __global__ void bin(const float* __restrict__ x, int nfeat, long long n,
                               const float* __restrict__ edges, const int* __restrict__ offsets,
                               const int* __restrict__ lengths, unsigned char* __restrict__ codes) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        for (int f = 0; f < nfeat; f++) {
            float v = x[(long long)f * n + i];
            unsigned char c = 0;
            if (v == v) {
                const float* e = edges + offsets[f];
                int lo = 0, hi = lengths[f];
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    if (e[mid] < v) lo = mid + 1; else hi = mid;
                }
                c = (unsigned char)(lo + 1);
            }
            codes[(long long)f * n + i] = c;
        }
    }
}

// forest_predict walks every tree for each row and averages the leaf
// probabilities, as forest.Compiled.Proba does: sums in tree order with
// float32 adds, then one multiply by 1/trees, then the argmax (ties to the
// lower class). codes are column-major (codes[f * n + i]); each thread
// stages its row's codes in shared memory. nodes are forest's packed 8-byte
// nodes (int16 feature, uint8 bin, pad, int32 next), trees back to back
// from node_off[t]; probs likewise from prob_off[t] (floats). Node k of
// tree t is nodes[node_off[t] + k × node_stride]: 1 lays trees out one
// after another (tree-major, what lulc uses), node_stride = trees with
// node_off[t] = t interleaves them node by node (FIL's other layout; the
// benchmark compares the two).
#define FOREST_BLOCK 128
#define MAX_FEATURES 64
#define MAX_CLASSES 32
// forest_out writes a row's class and confidence from its class sums:
// the first class of the largest mean (sum × inv, rounded once), the
// choice forest.Compiled makes.
template <int NC>
__device__ __forceinline__ void forest_out(const float* acc, long long i, int nclasses, float inv,
                                           unsigned char* __restrict__ cls, float* __restrict__ conf) {
    int best = 0;
    float top = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (c < nclasses) {
            float v = __fmul_rn(acc[c], inv);
            if (c == 0 || v > top) {
                best = c;
                top = v;
            }
        }
    }
    cls[i] = (unsigned char)best;
    conf[i] = top;
}

extern "C" __global__ void __launch_bounds__(FOREST_BLOCK) forest_predict(
    const unsigned char* __restrict__ codes, int nfeat, long long n,
    const int2* __restrict__ nodes, const int* __restrict__ node_off, int node_stride,
    const float* __restrict__ probs, const int* __restrict__ prob_off,
    int ntrees, int nclasses, float inv,
    unsigned char* __restrict__ cls, float* __restrict__ conf) {
    __shared__ unsigned char row[MAX_FEATURES * FOREST_BLOCK];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        long long i = base + threadIdx.x;
        if (i >= n) continue;
        for (int f = 0; f < nfeat; f++) row[f * FOREST_BLOCK + threadIdx.x] = codes[(long long)f * n + i];
        // The class loops are unrolled to MAX_CLASSES with constant
        // indices, so acc stays in registers (a loop bounded by nclasses
        // indexes it dynamically and puts it in local memory); the adds
        // happen in the same order either way.
        float acc[MAX_CLASSES];
#pragma unroll
        for (int c = 0; c < MAX_CLASSES; c++) acc[c] = 0.0f;
        for (int t = 0; t < ntrees; t++) {
            const int2* tn = nodes + node_off[t];
            int2 nd = tn[0];
            while ((short)(nd.x & 0xffff) >= 0) {
                int feat = (short)(nd.x & 0xffff);
                int bin = (nd.x >> 16) & 0xff;
                int next = nd.y + (row[feat * FOREST_BLOCK + threadIdx.x] > bin ? 1 : 0);
                nd = tn[(long long)next * node_stride];
            }
            const float* p = probs + prob_off[t] + (long long)nd.y * nclasses;
#pragma unroll
            for (int c = 0; c < MAX_CLASSES; c++)
                if (c < nclasses) acc[c] = __fadd_rn(acc[c], p[c]);
        }
        forest_out<MAX_CLASSES>(acc, i, nclasses, inv, cls, conf);
    }
}

// forest_walk is forest_predict (tree-major nodes only) with each tree's
// first WALK_TOP nodes in shared memory: lulc grows trees level by level,
// so a tree's first nodes are its top levels, which every row walks
// through, and those steps read shared memory instead of L2. A block's
// rows take the trees WALK_TREES at a time, their tops loaded together;
// node_len[t] is tree t's node count. Each row reaches the leaf
// forest_predict reaches and sums the trees in the same order: the same
// bits.
#define WALK_BLOCK 256
#define WALK_TOP 256
#define WALK_TREES 8
extern "C" __global__ void __launch_bounds__(WALK_BLOCK) forest_walk(
    const unsigned char* __restrict__ codes, int nfeat, long long n,
    const int2* __restrict__ nodes, const int* __restrict__ node_off, const int* __restrict__ node_len,
    const float* __restrict__ probs, const int* __restrict__ prob_off,
    int ntrees, int nclasses, float inv,
    unsigned char* __restrict__ cls, float* __restrict__ conf) {
    __shared__ unsigned char row[MAX_FEATURES * WALK_BLOCK];
    __shared__ int2 top[WALK_TREES * WALK_TOP];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        long long i = base + threadIdx.x;
        bool valid = i < n;
        // Each thread reads only its own row slot: no barrier needed
        // before it is refilled.
        if (valid)
            for (int f = 0; f < nfeat; f++) row[f * WALK_BLOCK + threadIdx.x] = codes[(long long)f * n + i];
        float acc[MAX_CLASSES];
#pragma unroll
        for (int c = 0; c < MAX_CLASSES; c++) acc[c] = 0.0f;
        for (int t0 = 0; t0 < ntrees; t0 += WALK_TREES) {
            __syncthreads(); // the last chunk's walks are done with top
            for (int k = threadIdx.x; k < WALK_TREES * WALK_TOP; k += blockDim.x) {
                int t = t0 + k / WALK_TOP, j = k % WALK_TOP;
                if (t < ntrees && j < node_len[t]) top[k] = nodes[node_off[t] + j];
            }
            __syncthreads();
            if (!valid) continue;
            int tend = min(ntrees - t0, WALK_TREES);
            for (int c = 0; c < tend; c++) {
                int t = t0 + c;
                const int2* tn = nodes + node_off[t];
                const int2* tt = top + c * WALK_TOP;
                int held = min(node_len[t], WALK_TOP);
                int2 nd = tt[0];
                while ((short)(nd.x & 0xffff) >= 0) {
                    int feat = (short)(nd.x & 0xffff);
                    int bin = (nd.x >> 16) & 0xff;
                    int next = nd.y + (row[feat * WALK_BLOCK + threadIdx.x] > bin ? 1 : 0);
                    nd = next < held ? tt[next] : tn[next];
                }
                const float* p = probs + prob_off[t] + (long long)nd.y * nclasses;
#pragma unroll
                for (int cc = 0; cc < MAX_CLASSES; cc++)
                    if (cc < nclasses) acc[cc] = __fadd_rn(acc[cc], p[cc]);
            }
        }
        if (valid) forest_out<MAX_CLASSES>(acc, i, nclasses, inv, cls, conf);
    }
}

// forest_sweep is the walk turned around: a block takes SWEEP_ROWS rows
// (two a thread) and sweeps every tree over them, each tree copied whole
// into shared memory once for all of them, so the deep levels that
// forest_walk reads from L2 (a 32-byte sector for every 8-byte node) are
// read from shared memory too; a tree longer than cap nodes keeps its
// last, deepest nodes in global memory. The nodes are 4-byte words
// (classifier.sweepNodes): a split holds its feature (6 bits), bin (8)
// and left child (17); a leaf holds, when its probabilities are one or
// two counts over a total of at most 1023 whose float32 quotients are the
// stored values bit for bit, the classes and counts themselves (no read
// at all), else the index of its record in leaves: a mask of its
// non-zero classes and their probabilities, in one 32-byte sector.
// Adding the zero probabilities of the other classes leaves a sum as it
// is (sums start at +0 and never turn negative), so every row sums the
// same values per class in the same tree order as the CPU's walk: the
// same bits. Dynamic shared memory: the tree's cap words, then the rows'
// codes feature by feature, SWEEP_STRIDE bytes a feature.
#define SWEEP_BLOCK 512
#define SWEEP_ROWS (2 * SWEEP_BLOCK)
// A feature's stride of 1028 bytes (257 words) puts the same row of
// consecutive features in consecutive banks.
#define SWEEP_STRIDE (SWEEP_ROWS + 4)
#define SWEEP_LEAF 0x80000000u
#define SWEEP_PAIR 0x40000000u

// sweep_step moves one row down one level.
__device__ __forceinline__ unsigned int sweep_step(unsigned int nd, const unsigned char* codes, const unsigned int* tree,
                                                   const unsigned int* __restrict__ spill, int held) {
    int feat = nd & 63, bin = (nd >> 6) & 0xff;
    int next = (int)(nd >> 14) + (codes[feat * SWEEP_STRIDE] > bin ? 1 : 0);
    return next < held ? tree[next] : __ldg(spill + next);
}

// sweep_leaf adds a leaf's probabilities to a row's sums: a pair's
// quotients, else its record's non-zero probabilities (a mask, then the
// values in class order).
template <int NC>
__device__ __forceinline__ void sweep_leaf(float* acc, unsigned int nd, const unsigned int* __restrict__ leaves, int nclasses) {
    if (nd & SWEEP_PAIR) {
        int a = nd & 31, b = (nd >> 5) & 31, na = (nd >> 10) & 1023, tot = (nd >> 20) & 1023;
        float ft = (float)tot;
        float pa = __fdiv_rn((float)na, ft), pb = __fdiv_rn((float)(tot - na), ft);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c == a)
                acc[c] = __fadd_rn(acc[c], pa);
            else if (c == b)
                acc[c] = __fadd_rn(acc[c], pb);
        }
        return;
    }
    const unsigned int* rec = leaves + (nd & 0x3fffffff);
    unsigned int mask = __ldg(rec);
    int j = 1;
#pragma unroll
    for (int c = 0; c < NC; c++)
        if (c < nclasses && ((mask >> c) & 1)) acc[c] = __fadd_rn(acc[c], __uint_as_float(__ldg(rec + j++)));
}

template <int NC>
__device__ __forceinline__ void forest_sweep_body(
    const unsigned char* __restrict__ codes, int nfeat, long long n,
    const unsigned int* __restrict__ nodes, const int* __restrict__ node_off, const int* __restrict__ node_len, int cap,
    const unsigned int* __restrict__ leaves, int ntrees, int nclasses, float inv,
    unsigned char* __restrict__ cls, float* __restrict__ conf) {
    extern __shared__ __align__(16) unsigned char sweep_smem[];
    unsigned int* tree = (unsigned int*)sweep_smem;
    unsigned char* rows = sweep_smem + cap * 4;
    long long base = (long long)blockIdx.x * SWEEP_ROWS;
    int r0 = threadIdx.x, r1 = threadIdx.x + SWEEP_BLOCK;
    long long i0 = base + r0, i1 = base + r1;
    bool v0 = i0 < n, v1 = i1 < n;
    for (int f = 0; f < nfeat; f++) {
        const unsigned char* col = codes + (long long)f * n;
        if (v0) rows[f * SWEEP_STRIDE + r0] = col[i0];
        if (v1) rows[f * SWEEP_STRIDE + r1] = col[i1];
    }
    float acc0[NC], acc1[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) acc0[c] = acc1[c] = 0.0f;
    const unsigned char* c0 = rows + r0;
    const unsigned char* c1 = rows + r1;
    for (int t = 0; t < ntrees; t++) {
        const unsigned int* tn = nodes + node_off[t];
        int held = min(node_len[t], cap);
        __syncthreads(); // the last tree's walks are done with tree
        // Trees start on 16-byte boundaries and are padded to them.
        const uint4* src = (const uint4*)tn;
        uint4* dst = (uint4*)tree;
        for (int k = threadIdx.x; k < (held + 3) / 4; k += SWEEP_BLOCK) dst[k] = __ldg(src + k);
        __syncthreads();
        // The two rows walk side by side: their loads are independent.
        unsigned int n0 = v0 ? tree[0] : SWEEP_LEAF, n1 = v1 ? tree[0] : SWEEP_LEAF;
        while (!((n0 & n1) & SWEEP_LEAF)) {
            if (!(n0 & SWEEP_LEAF)) n0 = sweep_step(n0, c0, tree, tn, held);
            if (!(n1 & SWEEP_LEAF)) n1 = sweep_step(n1, c1, tree, tn, held);
        }
        if (v0) sweep_leaf<NC>(acc0, n0, leaves, nclasses);
        if (v1) sweep_leaf<NC>(acc1, n1, leaves, nclasses);
    }
    if (v0) forest_out<NC>(acc0, i0, nclasses, inv, cls, conf);
    if (v1) forest_out<NC>(acc1, i1, nclasses, inv, cls, conf);
}

// forest_sweepN serves forests of up to N classes: the sums of a row's
// classes are registers, as few as the classes need (a larger N spills
// them to local memory under the 64 registers two blocks a
// multiprocessor leave a thread).
#define FOREST_SWEEP(NAME, NC, MINB)                                                                                   \
    extern "C" __global__ void __launch_bounds__(SWEEP_BLOCK, MINB) NAME(                                              \
        const unsigned char* __restrict__ codes, int nfeat, long long n, const unsigned int* __restrict__ nodes,      \
        const int* __restrict__ node_off, const int* __restrict__ node_len, int cap,                                  \
        const unsigned int* __restrict__ leaves, int ntrees, int nclasses, float inv, unsigned char* __restrict__ cls, \
        float* __restrict__ conf) {                                                                                    \
        forest_sweep_body<NC>(codes, nfeat, n, nodes, node_off, node_len, cap, leaves, ntrees, nclasses, inv, cls,     \
                              conf);                                                                                   \
    }
FOREST_SWEEP(forest_sweep8, 8, 2)
FOREST_SWEEP(forest_sweep12, 12, 2)
FOREST_SWEEP(forest_sweep16, 16, 2)
FOREST_SWEEP(forest_sweep32, 32, 1)

// ---- Random forest training: the GPU Engine of forest.Grow ----
//
// Rows of a batch of trees live in per-tree row lists (rows[t * n + p]);
// each node of the level being grown owns a range of its tree's list. The
// histograms are integer class counts, so their sums do not depend on
// thread order, and the split scores are computed in double with the
// operation order of forest's CPU grower, so both pick the same splits.

#define GOLDEN 0x9e3779b97f4a7c15ULL

// mix is rng.Mix, the splitmix64 finaliser.
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

// rf_boot draws each tree's bootstrap as forest's grower does: draw k of
// tree t lands on row rng.Hash(seed, t, 0xb007, k) % n. Without bootstrap
// every weight is 1. w (ntrees × n) must be zero on entry.
extern "C" __global__ void rf_boot(unsigned int* __restrict__ w, long long n, int ntrees,
                                   unsigned long long seed, const unsigned long long* __restrict__ trees, int boot) {
    long long total = n * ntrees;
    long long stride = (long long)gridDim.x * blockDim.x;
    unsigned long long h0 = mix(seed + GOLDEN);
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        long long t = idx / n, k = idx - t * n;
        if (!boot) {
            w[idx] = 1;
            continue;
        }
        unsigned long long h = mix(h0 ^ (trees[t] + GOLDEN));
        h = mix(h ^ (0xb007ULL + GOLDEN));
        h = mix(h ^ ((unsigned long long)k + GOLDEN));
        atomicAdd(&w[t * n + (long long)(h % (unsigned long long)n)], 1u);
    }
}

// rf_root lists the rows of tree blockIdx.y with a non-zero weight (in any
// order) and sums its class counts. cursor (ntrees) and counts (ntrees ×
// classes) must be zero on entry.
extern "C" __global__ void rf_root(const unsigned int* __restrict__ w, long long n, const unsigned char* __restrict__ y,
                                   int classes, unsigned int* __restrict__ rows, unsigned int* __restrict__ cursor,
                                   unsigned long long* __restrict__ counts) {
    __shared__ unsigned int sc[32];
    int t = blockIdx.y;
    if (threadIdx.x < 32) sc[threadIdx.x] = 0;
    __syncthreads();
    const unsigned int* wt = w + (long long)t * n;
    unsigned int lane = threadIdx.x & 31;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += (long long)gridDim.x * blockDim.x) {
        long long i = base + threadIdx.x;
        unsigned int wi = i < n ? wt[i] : 0;
        unsigned int m = __ballot_sync(0xffffffff, wi > 0);
        unsigned int at = 0;
        if (lane == 0 && m) at = atomicAdd(&cursor[t], __popc(m));
        at = __shfl_sync(0xffffffff, at, 0);
        if (wi > 0) {
            rows[(long long)t * n + at + __popc(m & ((1u << lane) - 1))] = (unsigned int)i;
            atomicAdd(&sc[y[i]], wi);
        }
    }
    __syncthreads();
    if (threadIdx.x < classes && sc[threadIdx.x]) atomicAdd(&counts[(long long)t * classes + threadIdx.x], (unsigned long long)sc[threadIdx.x]);
}

// A level's tasks: task k's rows are rows[base[k] .. base[k] + len[k]) of
// tree tree[k] (base includes tree × n), its candidate features
// feats[k * mtry ...].

// rf_hist adds one chunk of one big task's rows to the task's global
// histograms of candidates blockIdx.y × jn … + jn − 1 (each row is read
// once for the jn candidates): block b covers rows off[b] .. off[b] +
// chunk of task btask[b], whose histograms are slot bslot[b] of gh (slots ×
// mtry × nbins × classes counts).
extern "C" __global__ void rf_hist(const unsigned char* __restrict__ codes, long long n, const unsigned char* __restrict__ y,
                                   const unsigned int* __restrict__ w, const unsigned int* __restrict__ rows,
                                   const long long* __restrict__ base, const int* __restrict__ len, const int* __restrict__ tree,
                                   const int* __restrict__ feats, int mtry, int classes, int nbins, int jn,
                                   const int* __restrict__ btask, const int* __restrict__ boff, const int* __restrict__ bslot,
                                   int chunk, unsigned int* __restrict__ gh) {
    extern __shared__ unsigned int H[];
    int cells = nbins * classes;
    for (int c = threadIdx.x; c < jn * cells; c += blockDim.x) H[c] = 0;
    __syncthreads();
    int k = btask[blockIdx.x], j0 = blockIdx.y * jn;
    const unsigned int* wt = w + (long long)tree[k] * n;
    int end = min(boff[blockIdx.x] + chunk, len[k]);
    for (int p = boff[blockIdx.x] + threadIdx.x; p < end; p += blockDim.x) {
        unsigned int r = rows[base[k] + p];
        unsigned int wr = wt[r];
        int yr = y[r];
        for (int j = 0; j < jn; j++)
            atomicAdd(&H[j * cells + codes[(long long)feats[k * mtry + j0 + j] * n + r] * classes + yr], wr);
    }
    __syncthreads();
    unsigned int* g = gh + ((long long)bslot[blockIdx.x] * mtry + j0) * cells;
    for (int c = threadIdx.x; c < jn * cells; c += blockDim.x)
        if (H[c]) atomicAdd(&g[c], H[c]);
}

#define SPLIT_BLOCK 128

// rf_split finds the best split of task list[blockIdx.x], as forest's
// grower does: per candidate feature, class counts per bin (built here from
// the task's rows, jn candidates per pass over them, or, when big is set,
// read from slot blockIdx.x of gh), then every bin as a threshold with at
// least min_leaf weight on each side, scored Σl²/nl + Σr²/nr in double with
// the CPU's operation order; the highest score wins, ties to the lower
// feature, then the lower bin. The split is written to ofeat (-1: none),
// obin, oscore and oleft (the left class counts). Dynamic shared memory:
// jn × (nbins + 1) × classes counts.
extern "C" __global__ void __launch_bounds__(SPLIT_BLOCK) rf_split(
    const unsigned char* __restrict__ codes, long long n, const unsigned char* __restrict__ y,
    const unsigned int* __restrict__ w, const unsigned int* __restrict__ rows,
    const long long* __restrict__ base, const int* __restrict__ len, const int* __restrict__ tree,
    const int* __restrict__ feats, int mtry, int classes, int nbins, int min_leaf, int jn,
    const int* __restrict__ list, int big, const unsigned int* __restrict__ gh,
    int* __restrict__ ofeat, int* __restrict__ obin, double* __restrict__ oscore, unsigned int* __restrict__ oleft) {
    extern __shared__ unsigned int H[];
    __shared__ double rs[SPLIT_BLOCK];
    __shared__ int rb[SPLIT_BLOCK];
    __shared__ unsigned int best_left[32];
    __shared__ double best_score;
    __shared__ int best_f, best_b;
    int k = list[blockIdx.x];
    int cells = nbins * classes;
    unsigned int* tot = H + jn * cells;  // jn × classes totals
    if (threadIdx.x == 0) {
        best_score = 0.0;
        best_f = -1;
        best_b = 0;
    }
    const unsigned int* wt = w + (long long)tree[k] * n;
    for (int j0 = 0; j0 < mtry; j0 += jn) {
        if (big) {
            const unsigned int* g = gh + ((long long)blockIdx.x * mtry + j0) * cells;
            for (int c = threadIdx.x; c < jn * cells; c += blockDim.x) H[c] = g[c];
            __syncthreads();
        } else {
            for (int c = threadIdx.x; c < jn * cells; c += blockDim.x) H[c] = 0;
            __syncthreads();
            for (int p = threadIdx.x; p < len[k]; p += blockDim.x) {
                unsigned int r = rows[base[k] + p];
                unsigned int wr = wt[r];
                int yr = y[r];
                for (int j = 0; j < jn; j++)
                    atomicAdd(&H[j * cells + codes[(long long)feats[k * mtry + j0 + j] * n + r] * classes + yr], wr);
            }
            __syncthreads();
        }
        // Running sums over bins, one (candidate, class) per thread:
        // H[j][b][c] becomes the left count of class c for "code <= b".
        for (int q = threadIdx.x; q < jn * classes; q += blockDim.x) {
            unsigned int* h = H + (q / classes) * cells + q % classes;
            unsigned int run = 0;
            for (int b = 0; b < nbins; b++) {
                run += h[b * classes];
                h[b * classes] = run;
            }
            tot[q] = run;
        }
        __syncthreads();
        for (int jj = 0; jj < jn; jj++) {
            int f = feats[k * mtry + j0 + jj];
            const unsigned int* hj = H + jj * cells;
            const unsigned int* tj = tot + jj * classes;
            unsigned long long total = 0;
            for (int c = 0; c < classes; c++) total += tj[c];
            double my = -1.0;
            int mybin = 0;
            for (int b = threadIdx.x; b < nbins - 1; b += blockDim.x) {
                const unsigned int* L = hj + b * classes;
                unsigned long long nl = 0;
                for (int c = 0; c < classes; c++) nl += L[c];
                unsigned long long nr = total - nl;
                if (nl < (unsigned long long)min_leaf || nr < (unsigned long long)min_leaf) continue;
                double sl = 0.0, sr = 0.0;
                for (int c = 0; c < classes; c++) {
                    double l = (double)L[c];
                    double r = (double)(tj[c] - L[c]);
                    sl = __dadd_rn(sl, __dmul_rn(l, l));
                    sr = __dadd_rn(sr, __dmul_rn(r, r));
                }
                double s = __dadd_rn(__ddiv_rn(sl, (double)nl), __ddiv_rn(sr, (double)nr));
                if (s > my) {
                    my = s;
                    mybin = b;
                }
            }
            rs[threadIdx.x] = my;
            rb[threadIdx.x] = mybin;
            __syncthreads();
            for (int h = SPLIT_BLOCK / 2; h > 0; h >>= 1) {
                if (threadIdx.x < h) {
                    double o = rs[threadIdx.x + h];
                    int ob = rb[threadIdx.x + h];
                    if (o > rs[threadIdx.x] || (o == rs[threadIdx.x] && ob < rb[threadIdx.x])) {
                        rs[threadIdx.x] = o;
                        rb[threadIdx.x] = ob;
                    }
                }
                __syncthreads();
            }
            if (threadIdx.x == 0) {
                double s = rs[0];
                if (s >= 0.0 && (s > best_score || (s == best_score && best_f >= 0 && f < best_f))) {
                    best_score = s;
                    best_f = f;
                    best_b = rb[0];
                }
            }
            __syncthreads();
            if (best_f == f && threadIdx.x < classes) best_left[threadIdx.x] = hj[best_b * classes + threadIdx.x];
            __syncthreads();
        }
    }
    if (threadIdx.x == 0) {
        ofeat[k] = best_f;
        obin[k] = best_b;
        oscore[k] = best_score;
    }
    if (threadIdx.x < classes) oleft[(long long)k * classes + threadIdx.x] = best_f >= 0 ? best_left[threadIdx.x] : 0;
}

// rf_partition moves one chunk of a split task's rows from in to out: rows
// going left (code <= bin) fill the task's range from its start, rows going
// right from its end; nleft and nright (per task, zero on entry) count
// them.
extern "C" __global__ void rf_partition(const unsigned char* __restrict__ codes, long long n,
                                        const unsigned int* __restrict__ in, unsigned int* __restrict__ out,
                                        const long long* __restrict__ base, const int* __restrict__ len,
                                        const int* __restrict__ feat, const int* __restrict__ bin,
                                        const int* __restrict__ btask, const int* __restrict__ boff, int chunk,
                                        unsigned int* __restrict__ nleft, unsigned int* __restrict__ nright) {
    int k = btask[blockIdx.x];
    const unsigned char* col = codes + (long long)feat[k] * n;
    int b = bin[k], l = len[k];
    int start = boff[blockIdx.x], end = min(start + chunk, l);
    unsigned int lane = threadIdx.x & 31, below = (1u << lane) - 1;
    for (int p0 = start; p0 < end; p0 += blockDim.x) {
        int p = p0 + threadIdx.x;
        bool valid = p < end;
        unsigned int r = valid ? in[base[k] + p] : 0;
        bool left = valid && col[r] <= b;
        bool right = valid && !left;
        unsigned int lm = __ballot_sync(0xffffffff, left), rm = __ballot_sync(0xffffffff, right);
        unsigned int la = 0, ra = 0;
        if (lane == 0) {
            if (lm) la = atomicAdd(&nleft[k], __popc(lm));
            if (rm) ra = atomicAdd(&nright[k], __popc(rm));
        }
        la = __shfl_sync(0xffffffff, la, 0);
        ra = __shfl_sync(0xffffffff, ra, 0);
        if (left) out[base[k] + la + __popc(lm & below)] = r;
        if (right) out[base[k] + l - 1 - (ra + __popc(rm & below))] = r;
    }
}

// rf_split_tiny is rf_split for tasks of at most 32 rows: one warp per
// task, one row per lane. Every lane proposes its own row's code as the
// threshold and sums the class counts of the rows at or below it, so no
// histogram is built; the candidates are the bins the rows use, which is
// the CPU's candidate set, and the scores and tie rules are rf_split's.
extern "C" __global__ void rf_split_tiny(
    const unsigned char* __restrict__ codes, long long n, const unsigned char* __restrict__ y,
    const unsigned int* __restrict__ w, const unsigned int* __restrict__ rows,
    const long long* __restrict__ base, const int* __restrict__ len, const int* __restrict__ tree,
    const int* __restrict__ feats, int mtry, int classes, int min_leaf,
    const int* __restrict__ list, int count,
    int* __restrict__ ofeat, int* __restrict__ obin, double* __restrict__ oscore, unsigned int* __restrict__ oleft) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    unsigned int lane = threadIdx.x & 31;
    if (warp >= count) return;  // whole warps leave together
    int k = list[warp];
    int m = len[k];
    bool has = lane < (unsigned int)m;
    unsigned int r = has ? rows[base[k] + lane] : 0;
    unsigned int wi = has ? w[(long long)tree[k] * n + r] : 0;
    int yi = has ? y[r] : 0;
    unsigned int tot[32], left[32];
    for (int c = 0; c < classes; c++) tot[c] = 0;
    for (int s = 0; s < m; s++) tot[__shfl_sync(0xffffffff, yi, s)] += __shfl_sync(0xffffffff, wi, s);
    unsigned long long total = 0;
    for (int c = 0; c < classes; c++) total += tot[c];
    double best = 0.0;
    int best_f = -1, best_b = 0;
    for (int j = 0; j < mtry; j++) {
        int f = feats[k * mtry + j];
        int code = has ? codes[(long long)f * n + r] : 256;
        for (int c = 0; c < classes; c++) left[c] = 0;
        for (int s = 0; s < m; s++) {
            int cs = __shfl_sync(0xffffffff, code, s);
            int ys = __shfl_sync(0xffffffff, yi, s);
            unsigned int ws = __shfl_sync(0xffffffff, wi, s);
            if (cs <= code) left[ys] += ws;
        }
        double my = -1.0;
        if (has) {
            unsigned long long nl = 0;
            for (int c = 0; c < classes; c++) nl += left[c];
            unsigned long long nr = total - nl;
            if (nl >= (unsigned long long)min_leaf && nr >= (unsigned long long)min_leaf) {
                double sl = 0.0, sr = 0.0;
                for (int c = 0; c < classes; c++) {
                    double l = (double)left[c];
                    double rr = (double)(tot[c] - left[c]);
                    sl = __dadd_rn(sl, __dmul_rn(l, l));
                    sr = __dadd_rn(sr, __dmul_rn(rr, rr));
                }
                my = __dadd_rn(__ddiv_rn(sl, (double)nl), __ddiv_rn(sr, (double)nr));
            }
        }
        int mybin = code;
        for (int h = 16; h > 0; h >>= 1) {
            double o = __shfl_xor_sync(0xffffffff, my, h);
            int ob = __shfl_xor_sync(0xffffffff, mybin, h);
            if (o > my || (o == my && ob < mybin)) {
                my = o;
                mybin = ob;
            }
        }
        if (my >= 0.0 && (my > best || (my == best && best_f >= 0 && f < best_f))) {
            best = my;
            best_f = f;
            best_b = mybin;
        }
    }
    // The left counts of the winner, lane c summing class c.
    if (best_f >= 0) {
        int code = has ? codes[(long long)best_f * n + r] : 256;
        unsigned int lc = 0;
        for (int s = 0; s < m; s++) {
            int cs = __shfl_sync(0xffffffff, code, s);
            int ys = __shfl_sync(0xffffffff, yi, s);
            unsigned int ws = __shfl_sync(0xffffffff, wi, s);
            if (cs <= best_b && ys == (int)lane) lc += ws;
        }
        if (lane < (unsigned int)classes) oleft[(long long)k * classes + lane] = lc;
    } else if (lane < (unsigned int)classes) {
        oleft[(long long)k * classes + lane] = 0;
    }
    if (lane == 0) {
        ofeat[k] = best_f;
        obin[k] = best_b;
        oscore[k] = best;
    }
}

// composite is composite.WindowTemporal on the device: per pixel and date,
// valid where the scene class is not dropped (drop: a 256-bit set) and no
// band is at its nodata; per band, the median of the valid dates'
// reflectances float32(dn) × scale + offset (a stable insertion sort in
// date order, as composite.Median), quantised to round((r − qoffset) /
// qscale) clamped to 1…65535 in double, 0 where no date is valid; and the
// valid count. dn is date-major: dn[(d × nbands + b) × n + i]; scale,
// offset and nodata are per (date, band); out[b × n + i].
//
// With nsrc > 0 it also writes the temporal planes after the bands' (as
// composite.Temporal): per source (tprog: 5 ints each, its operation and
// input bands, as the features kernel's program), its value on each valid
// date, NaN values not counted, sorted stably; npct percentiles by nearest
// rank v[(p·k + 99)/100 − 1], then per season (smask: each date's season
// bits) the median of the season's values in sorted order; sources other
// than bands add 1 before quantisation.
//
// A pixel's values are sorted in dynamic shared memory: ndates floats and
// ndates date bytes a thread, strided by the block's size so that a
// warp's threads at one rank touch consecutive words. The host sizes the
// block so that this fits (composite_block in twins.go). Held in a
// thread's local memory instead, 255 floats and 255 bytes a thread
// overflowed L1 once a window had a few tens of dates, and every move of
// the sort went to L2: the cost per pixel grew with the square of the
// dates' count in memory traffic, not just in moves.
#define MAX_DATES 255
__device__ __forceinline__ unsigned short quantise_dn(float m, double qscale, double qoffset) {
    if (m != m) return 0;
    double r = round(__ddiv_rn(__dsub_rn((double)m, qoffset), qscale));
    return (unsigned short)fmax(1.0, fmin(65535.0, r));
}

extern "C" __global__ void composite(const unsigned short* __restrict__ dn, const unsigned char* __restrict__ scl,
                                     int ndates, int nbands, long long n, const unsigned int* __restrict__ drop,
                                     const float* __restrict__ scale, const float* __restrict__ offset,
                                     const unsigned short* __restrict__ nodata, double qscale, double qoffset,
                                     unsigned short* __restrict__ out, unsigned char* __restrict__ count,
                                     const int* __restrict__ tprog, int nsrc, const int* __restrict__ pcts, int npct,
                                     const unsigned int* __restrict__ smask, int nseason) {
    extern __shared__ float sorted[];
    const int bs = blockDim.x;
    // This thread's slots: value j at buf[j × bs], its date at date[j × bs].
    float* buf = sorted + threadIdx.x;
    unsigned char* date = (unsigned char*)(sorted + (long long)ndates * bs) + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        // A bit per date: up to 255 dates (the count is a byte).
        unsigned int valid[(MAX_DATES + 32) / 32];
        int nvalid = 0;
        for (int d = 0; d < ndates; d++) {
            unsigned int c = scl[(long long)d * n + i];
            bool ok = !((drop[c >> 5] >> (c & 31)) & 1u);
            for (int b = 0; b < nbands && ok; b++)
                if (dn[((long long)d * nbands + b) * n + i] == nodata[d * nbands + b]) ok = false;
            if ((d & 31) == 0) valid[d >> 5] = 0;
            if (ok) {
                valid[d >> 5] |= 1u << (d & 31);
                nvalid++;
            }
        }
        count[i] = (unsigned char)nvalid;
        for (int b = 0; b < nbands; b++) {
            int k = 0;
            for (int d = 0; d < ndates; d++) {
                if (!((valid[d >> 5] >> (d & 31)) & 1u)) continue;
                float x = __fadd_rn(__fmul_rn((float)dn[((long long)d * nbands + b) * n + i], scale[d * nbands + b]), offset[d * nbands + b]);
                int j = k;
                while (j > 0 && buf[(j - 1) * bs] > x) {
                    buf[j * bs] = buf[(j - 1) * bs];
                    j--;
                }
                buf[j * bs] = x;
                k++;
            }
            out[(long long)b * n + i] = quantise_dn(median_strided(buf, bs, k), qscale, qoffset);
        }
        int per = npct + nseason;
        for (int s = 0; s < nsrc; s++) {
            const int* p = tprog + 5 * s;
            int op = p[0], ni = op_inputs(op);
            int k = 0;
            for (int d = 0; d < ndates; d++) {
                if (!((valid[d >> 5] >> (d & 31)) & 1u)) continue;
                float v[4];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    v[q] = 0.0f;
                    if (q < ni) {
                        int b = p[1 + q];
                        v[q] = __fadd_rn(__fmul_rn((float)dn[((long long)d * nbands + b) * n + i], scale[d * nbands + b]), offset[d * nbands + b]);
                    }
                }
                float x = apply_op(op, v);
                if (x != x) continue;
                int j = k;
                while (j > 0 && buf[(j - 1) * bs] > x) {
                    buf[j * bs] = buf[(j - 1) * bs];
                    date[j * bs] = date[(j - 1) * bs];
                    j--;
                }
                buf[j * bs] = x;
                date[j * bs] = (unsigned char)d;
                k++;
            }
            long long o = (long long)(nbands + s * per) * n + i;
            for (int j = 0; j < per; j++) {
                float x;
                if (j < npct) {
                    x = k == 0 ? NAN_F : buf[((pcts[j] * k + 99) / 100 - 1) * bs];
                } else {
                    // The season's values in sorted order: the median's
                    // one or two ranks among them, found in one walk.
                    int bit = j - npct, ks = 0;
                    for (int q = 0; q < k; q++) ks += (smask[date[q * bs]] >> bit) & 1u;
                    float lo = NAN_F, hi = NAN_F;
                    for (int q = 0, r = 0; q < k && r <= ks / 2; q++) {
                        if (!((smask[date[q * bs]] >> bit) & 1u)) continue;
                        if (r == ks / 2 - 1) lo = buf[q * bs];
                        if (r == ks / 2) hi = buf[q * bs];
                        r++;
                    }
                    if (ks == 0) {
                        x = NAN_F;
                    } else if (ks % 2 == 1) {
                        x = hi;
                    } else {
                        x = __fmul_rn(__fadd_rn(lo, hi), 0.5f);
                        if (x != x) x = NAN_F;
                    }
                }
                if (op != OP_BAND && x == x) x = __fadd_rn(x, 1.0f);
                out[o + (long long)j * n] = quantise_dn(x, qscale, qoffset);
            }
        }
    }
}

// upsample_bilinear is resample.Bilinear on the device: one thread per
// output pixel of a ww×wh window starting at fine pixel (wx, wy), on a grid
// k times finer than the rw×rh coarse raster whose rectangle (px0, py0,
// pw, ph) is in plane. Along each axis the output centre lies between
// coarse centres b and b+1 with 2k·b + r = 2I + 1 − k (0 ≤ r < 2k), weights
// 2k − r and r; neighbours outside the raster or equal to nodata (when
// has_nodata) weigh 0; the output is (2S + W) / 2W in integers, nodata when
// W = 0. Every step is exact, so it equals the Go function bit for bit.
extern "C" __global__ void upsample_bilinear(const unsigned short* __restrict__ plane, int px0, int py0, int pw, int ph,
                                             int wx, int wy, int ww, int wh, int k, int rw, int rh, int nodata,
                                             int has_nodata, unsigned short* __restrict__ out) {
    long long n = (long long)ww * wh;
    long long stride = (long long)gridDim.x * blockDim.x;
    int twok = 2 * k;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int ox = (int)(i % ww), oy = (int)(i / ww);
        int nx = 2 * (wx + ox) + 1 - k, ny = 2 * (wy + oy) + 1 - k;
        int bx = nx >= 0 ? nx / twok : -((-nx + twok - 1) / twok);
        int by = ny >= 0 ? ny / twok : -((-ny + twok - 1) / twok);
        int rx = nx - bx * twok, ry = ny - by * twok;
        int cx[2] = {bx, bx + 1}, cy[2] = {by, by + 1};
        unsigned int wxs[2] = {(unsigned int)(twok - rx), (unsigned int)rx};
        unsigned int wys[2] = {(unsigned int)(twok - ry), (unsigned int)ry};
        unsigned int s = 0, w = 0;
        for (int a = 0; a < 2; a++) {
            if (wys[a] == 0 || cy[a] < 0 || cy[a] >= rh) continue;
            const unsigned short* row = plane + (long long)(cy[a] - py0) * pw;
            for (int c = 0; c < 2; c++) {
                if (wxs[c] == 0 || cx[c] < 0 || cx[c] >= rw) continue;
                unsigned int v = row[cx[c] - px0];
                if (has_nodata && v == (unsigned int)nodata) continue;
                unsigned int wt = wys[a] * wxs[c];
                s += wt * v;
                w += wt;
            }
        }
        out[i] = w == 0 ? (unsigned short)nodata : (unsigned short)((2 * s + w) / (2 * w));
    }
}

// ---- Decoding compressed GeoTIFF tiles (decode.Tile on the device) ----
//
// inflate decodes zlib-wrapped DEFLATE streams (RFC 1950/1951), one warp
// per stream. DEFLATE is sequential in its symbols, so the 32 lanes decode
// every symbol together, redundantly, and keep one control flow; they
// share the work that is parallel: filling the Huffman lookup tables,
// copying stored blocks and copying matches. A match of length L at
// distance D < L repeats its last D bytes, so byte i of it is byte i mod D
// of the source and the lanes copy it in one pass without waiting on each
// other. Lane 0 writes literals; __syncwarp orders every write before the
// next match reads it.
//
// Stream i is decoded into dst[i], up to want bytes and no further, as the Go twin
// reads exactly a tile's bytes: what follows in the stream (its Adler-32)
// is not read. status[i] says how stream i ended (INFLATE_OK or the first
// error met).

#define INFLATE_OK 0
#define INFLATE_BAD_HEADER 1
#define INFLATE_BAD_BLOCK 2
#define INFLATE_BAD_CODE 3
#define INFLATE_BAD_DISTANCE 4
#define INFLATE_OVERRUN 5
#define INFLATE_SHORT 6

#define LIT_FAST 10
#define DIST_FAST 8

// A Huffman code: a direct table on the first fast bits of the stream
// (entry = symbol << 4 | code length, 0 when the code is longer), and
// the canonical description for longer codes: how many codes each length
// has and the symbols in code order.
struct HuffTables {
    unsigned short lit[1 << LIT_FAST];
    unsigned short dist[1 << DIST_FAST];
    unsigned short lsorted[288];
    unsigned short dsorted[32];
    unsigned short lcount[16];
    unsigned short dcount[16];
    unsigned short start[16];
    unsigned short first[16];
    unsigned char lens[320];
    unsigned char clens[19];
};

__constant__ unsigned short len_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                            35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
__constant__ unsigned char len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                                            3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
__constant__ unsigned short dist_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                             193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
                                             6145, 8193, 12289, 16385, 24577};
__constant__ unsigned char dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                             6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
__constant__ unsigned char clen_order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// BitReader holds the stream's next cnt bits in buf, least significant
// first, refilled a 32-bit word at a time (streams start 4-byte aligned and
// are followed by padding, so a word read past the end is harmless).
struct BitReader {
    const unsigned int* p;
    const unsigned int* end;  // one word past the stream's last whole or partial word
    unsigned long long buf;
    int cnt;
    bool overrun;
};

__device__ __forceinline__ void bits_need32(BitReader& br) {
    if (br.cnt < 32) {
        if (br.p > br.end) br.overrun = true;
        br.buf |= (unsigned long long)(br.overrun ? 0u : *br.p) << br.cnt;
        br.p++;
        br.cnt += 32;
    }
}

__device__ __forceinline__ unsigned int bits_take(BitReader& br, int n) {
    unsigned int v = (unsigned int)(br.buf & ((1ull << n) - 1));
    br.buf >>= n;
    br.cnt -= n;
    return v;
}

// huff_build fills a table from n code lengths: lane 0 counts and sorts
// (at most 320 symbols), then the lanes fill the direct table together.
// It returns false for an over-subscribed code; an incomplete one is
// allowed (a single distance code) and fails only if a missing code is
// met.
__device__ bool huff_build(const unsigned char* lens, int n, int fast, unsigned short* table, unsigned short* count,
                           unsigned short* sorted, HuffTables& t, unsigned int lane) {
    __shared__ int ok_flag[32];
    unsigned int warp = threadIdx.x >> 5;
    if (lane == 0) {
        for (int l = 0; l < 16; l++) count[l] = 0;
        for (int s = 0; s < n; s++) count[lens[s]]++;
        count[0] = 0;
        int left = 1, ok = 1;
        for (int l = 1; l < 16; l++) {
            left = (left << 1) - count[l];
            if (left < 0) ok = 0;
        }
        unsigned int code = 0, at = 0;
        for (int l = 1; l < 16; l++) {
            t.start[l] = (unsigned short)at;
            t.first[l] = (unsigned short)code;
            at += count[l];
            code = (code + count[l]) << 1;
        }
        unsigned short next[16];
        for (int l = 1; l < 16; l++) next[l] = t.start[l];
        for (int s = 0; s < n; s++)
            if (lens[s]) sorted[next[lens[s]]++] = (unsigned short)s;
        ok_flag[warp] = ok;
    }
    for (int e = lane; e < (1 << fast); e += 32) table[e] = 0;
    __syncwarp();
    int used = t.start[15] + count[15];
    for (int i = lane; i < used; i += 32) {
        int s = sorted[i], l = lens[s];
        if (l > fast) continue;
        unsigned int code = t.first[l] + (i - t.start[l]);
        unsigned int rev = __brev(code) >> (32 - l);
        for (unsigned int e = rev; e < (1u << fast); e += 1u << l) table[e] = (unsigned short)(s << 4 | l);
    }
    __syncwarp();
    return ok_flag[warp] != 0;
}

// huff_decode reads one symbol (the reader holds at least 15 bits), or
// returns -1 for a code the table does not have.
__device__ __forceinline__ int huff_decode(BitReader& br, const unsigned short* table, int fast,
                                           const unsigned short* count, const unsigned short* sorted) {
    unsigned int e = table[br.buf & ((1u << fast) - 1)];
    if (e & 15) {
        bits_take(br, e & 15);
        return (int)(e >> 4);
    }
    // A code longer than the table: walk the canonical code bit by bit.
    int code = 0, first = 0, index = 0;
    for (int l = 1; l < 16; l++) {
        code |= (int)((br.buf >> (l - 1)) & 1);
        int c = count[l];
        if (code - c < first) {
            bits_take(br, l);
            return sorted[index + (code - first)];
        }
        index += c;
        first = (first + c) << 1;
        code <<= 1;
    }
    return -1;
}

// inflate_dynamic_lengths reads a dynamic block's code lengths into t.lens
// (hlit literal/length then hdist distance lengths).
__device__ int inflate_dynamic_lengths(BitReader& br, HuffTables& t, unsigned int lane, int& hlit, int& hdist) {
    bits_need32(br);
    hlit = (int)bits_take(br, 5) + 257;
    hdist = (int)bits_take(br, 5) + 1;
    int hclen = (int)bits_take(br, 4) + 4;
    if (hlit > 286 || hdist > 30) return INFLATE_BAD_BLOCK;
    for (int i = 0; i < 19; i++) {
        bits_need32(br);
        unsigned int v = i < hclen ? bits_take(br, 3) : 0;
        if (lane == 0) t.clens[clen_order[i]] = (unsigned char)v;
    }
    __syncwarp();
    if (!huff_build(t.clens, 19, 7, t.lit, t.lcount, t.lsorted, t, lane)) return INFLATE_BAD_CODE;
    int total = hlit + hdist, i = 0;
    unsigned char prev = 0;
    while (i < total) {
        bits_need32(br);
        int s = huff_decode(br, t.lit, 7, t.lcount, t.lsorted);
        if (s < 0) return INFLATE_BAD_CODE;
        int rep = 1;
        unsigned char v = (unsigned char)s;
        if (s == 16) {
            if (i == 0) return INFLATE_BAD_CODE;
            v = prev;
            rep = 3 + (int)bits_take(br, 2);
        } else if (s == 17) {
            v = 0;
            rep = 3 + (int)bits_take(br, 3);
        } else if (s == 18) {
            v = 0;
            rep = 11 + (int)bits_take(br, 7);
        }
        if (i + rep > total) return INFLATE_BAD_CODE;
        for (int k = lane; k < rep; k += 32) t.lens[i + k] = v;
        i += rep;
        prev = v;
    }
    __syncwarp();
    if (t.lens[256] == 0) return INFLATE_BAD_CODE;  // no end-of-block code
    return INFLATE_OK;
}

extern "C" __global__ void inflate(const unsigned char* __restrict__ src, const unsigned long long* __restrict__ src_off,
                                   const unsigned int* __restrict__ src_len, unsigned char* const* __restrict__ dst,
                                   unsigned int want, int n, int* __restrict__ status) {
    extern __shared__ HuffTables tables[];
    unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int tile = blockIdx.x * (blockDim.x >> 5) + warp;
    if (tile >= n) return;  // whole warps leave together
    HuffTables& t = tables[warp];
    unsigned char* out = dst[tile];
    const unsigned char* in = src + src_off[tile];
    unsigned int inlen = src_len[tile];
    int st = INFLATE_OK;
    if (inlen < 2) {
        st = INFLATE_BAD_HEADER;
    } else {
        unsigned int cmf = in[0], flg = in[1];
        if ((cmf & 15) != 8 || (cmf >> 4) > 7 || (cmf * 256 + flg) % 31 != 0 || (flg & 0x20)) st = INFLATE_BAD_HEADER;
    }
    BitReader br;
    br.p = (const unsigned int*)in;
    br.end = (const unsigned int*)(in + ((inlen + 3) & ~3u));
    br.buf = 0;
    br.cnt = 0;
    br.overrun = false;
    bits_need32(br);
    bits_take(br, 16);  // the zlib header
    unsigned int pos = 0;
    bool last = false;
    while (st == INFLATE_OK && !last && pos < want) {
        bits_need32(br);
        last = bits_take(br, 1);
        unsigned int type = bits_take(br, 2);
        if (type == 0) {
            // A stored block: whole bytes from the next byte boundary.
            bits_take(br, br.cnt & 7);
            bits_need32(br);
            unsigned int len = bits_take(br, 16), nlen = bits_take(br, 16);
            if (len != (~nlen & 0xffffu)) {
                st = INFLATE_BAD_BLOCK;
                break;
            }
            len = min(len, want - pos);
            while (len > 0 && br.cnt >= 8) {
                unsigned int b = bits_take(br, 8);
                if (lane == 0) out[pos] = (unsigned char)b;
                pos++;
                len--;
            }
            if (len > 0) {
                const unsigned char* q = (const unsigned char*)br.p;
                if (q + len > in + inlen) {
                    st = INFLATE_OVERRUN;
                    break;
                }
                // Eight bytes a lane in flight, not one: each load waits
                // for memory, and stored blocks are whole tiles of noise.
                unsigned int i = lane;
                for (; i + 7 * 32 < len; i += 8 * 32) {
                    unsigned char v[8];
#pragma unroll
                    for (int k = 0; k < 8; k++) v[k] = q[i + 32 * k];
#pragma unroll
                    for (int k = 0; k < 8; k++) out[pos + i + 32 * k] = v[k];
                }
                for (; i < len; i += 32) out[pos + i] = q[i];
                pos += len;
                q += len;
                unsigned int a = (unsigned int)((unsigned long long)q & 3);
                br.p = (const unsigned int*)(q - a);
                br.buf = 0;
                br.cnt = 0;
                if (a) {
                    br.buf = *br.p++ >> (8 * a);
                    br.cnt = 32 - 8 * a;
                }
            }
            __syncwarp();
            continue;
        }
        if (type == 3) {
            st = INFLATE_BAD_BLOCK;
            break;
        }
        int hlit = 288, hdist = 30;
        if (type == 1) {
            // Fixed codes (RFC 1951 3.2.6).
            for (int s = lane; s < 320; s += 32) {
                unsigned char l;
                if (s < 288) l = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
                else l = 5;
                t.lens[s] = l;
            }
            hdist = 32;
            __syncwarp();
        } else {
            st = inflate_dynamic_lengths(br, t, lane, hlit, hdist);
            if (st != INFLATE_OK) break;
        }
        if (!huff_build(t.lens, hlit, LIT_FAST, t.lit, t.lcount, t.lsorted, t, lane) ||
            !huff_build(t.lens + hlit, hdist, DIST_FAST, t.dist, t.dcount, t.dsorted, t, lane)) {
            st = INFLATE_BAD_CODE;
            break;
        }
        for (;;) {
            // Runs of literals, most of a tile that compresses little, take
            // a short loop: a lookup, a shift and a store each, the bit
            // buffer refilled a word at a time while the stream has words
            // left. Whatever else comes (a longer code, a length, the
            // block's end, the stream's last word) leaves it for the
            // general steps below, which take it from the same state.
            while (pos < want) {
                if (br.cnt < 32) {
                    if (br.p >= br.end) break;
                    br.buf |= (unsigned long long)(*br.p) << br.cnt;
                    br.p++;
                    br.cnt += 32;
                }
                unsigned int e = t.lit[(unsigned int)br.buf & ((1u << LIT_FAST) - 1)];
                if ((e & 15) == 0 || e >= (256u << 4)) break;
                bits_take(br, e & 15);
                if (lane == 0) out[pos] = (unsigned char)(e >> 4);
                pos++;
            }
            if (pos == want) break;
            bits_need32(br);
            int s = huff_decode(br, t.lit, LIT_FAST, t.lcount, t.lsorted);
            if (s < 256) {
                if (s < 0) {
                    st = INFLATE_BAD_CODE;
                    break;
                }
                if (lane == 0) out[pos] = (unsigned char)s;
                if (++pos == want) break;
                continue;
            }
            if (s == 256) break;
            s -= 257;
            if (s >= 29) {
                st = INFLATE_BAD_CODE;
                break;
            }
            unsigned int len = len_base[s] + bits_take(br, len_extra[s]);
            bits_need32(br);
            int d = huff_decode(br, t.dist, DIST_FAST, t.dcount, t.dsorted);
            if (d < 0 || d >= 30) {
                st = INFLATE_BAD_CODE;
                break;
            }
            unsigned int dist = dist_base[d] + bits_take(br, dist_extra[d]);
            if (dist > pos) {
                st = INFLATE_BAD_DISTANCE;
                break;
            }
            len = min(len, want - pos);
            __syncwarp();
            const unsigned char* from = out + pos - dist;
            if (dist >= len) {
                for (unsigned int i = lane; i < len; i += 32) out[pos + i] = from[i];
            } else {
                for (unsigned int i = lane; i < len; i += 32) out[pos + i] = from[i % dist];
            }
            __syncwarp();
            pos += len;
            if (pos == want) break;
        }
        if (br.overrun && st == INFLATE_OK) st = INFLATE_OVERRUN;
    }
    // Bits read past the stream's end (zero padding) are an overrun even
    // when they decoded into something.
    long long used = (long long)(br.p - (const unsigned int*)in) * 32 - br.cnt;
    if (st == INFLATE_OK && (br.overrun || used > (long long)inlen * 8)) st = INFLATE_OVERRUN;
    if (st == INFLATE_OK && pos < want) st = INFLATE_SHORT;
    if (lane == 0) status[tile] = st;
}

// tiff_unpack turns decoded tile bytes into samples, one thread per row of
// w samples (tiles × h of them, tile i at tile[i]): 16-bit
// samples swapped from big-endian when big_endian, then TIFF predictor 2
// undone by summing each row left to right modulo 2⁸ or 2¹⁶.
extern "C" __global__ void tiff_unpack(unsigned char* const* __restrict__ tile, int tiles, int w, int h,
                                       int sample_bytes, int big_endian, int predictor) {
    long long n = (long long)tiles * h;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += stride) {
        unsigned char* row = tile[r / h] + (r % h) * (long long)w * sample_bytes;
        if (sample_bytes == 1) {
            if (predictor == 2) {
                unsigned char acc = row[0];
                for (int i = 1; i < w; i++) row[i] = acc = (unsigned char)(acc + row[i]);
            }
            continue;
        }
        unsigned short* s = (unsigned short*)row;
        unsigned short acc = 0;
        for (int i = 0; i < w; i++) {
            unsigned short v = s[i];
            if (big_endian) v = (unsigned short)(v >> 8 | v << 8);
            if (predictor == 2 && i > 0) v = (unsigned short)(acc + v);
            s[i] = acc = v;
        }
    }
}

// gather_tiles copies the rectangle (x, y, w, h) of a band out of its
// decoded tiles of bw × bh 16-bit samples: tiles[j × tw + i] points at
// tile (tx0 + i, ty0 + j), or is 0 for a tile never written, whose pixels
// are fill. One thread per output pixel, rows of out are w long.
extern "C" __global__ void gather_tiles(const unsigned long long* __restrict__ tiles, int tx0, int ty0, int tw,
                                        int bw, int bh, int x, int y, int w, int h, int fill,
                                        unsigned short* __restrict__ out) {
    long long n = (long long)w * h;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int px = x + (int)(i % w), py = y + (int)(i / w);
        const unsigned short* t = (const unsigned short*)tiles[(py / bh - ty0) * tw + (px / bw - tx0)];
        out[i] = t ? t[(py % bh) * bw + px % bw] : (unsigned short)fill;
    }
}

// The stratified, block-split draw from a tile in memory (the twin of
// package sampling's drawCount and drawCollect). Keys are rng.Extend
// chains of splitmix64's finaliser: integer arithmetic, the same bits on
// every machine.
#define DRAW_NONE 0xffffu
// DRAW_BUFFERED marks a training candidate that the split's buffer drops.
#define DRAW_BUFFERED 0xfffeu

// extend64 is rng.Extend.
__device__ __forceinline__ unsigned long long extend64(unsigned long long h, unsigned long long k) {
    return mix(h ^ (k + GOLDEN));
}

// draw_validation says whether block (br, bc) went to validation: its
// split is Unit(Extend(Extend(splitBase, block row), block column)) <
// valFrac, Unit being the top 53 bits over 2^53, exact in double.
__device__ __forceinline__ bool draw_validation(unsigned long long splitBase, long long br, long long bc, double valFrac) {
    unsigned long long hs = extend64(extend64(splitBase, (unsigned long long)br), (unsigned long long)bc);
    return (double)(hs >> 11) / 9007199254740992.0 < valFrac;
}

// draw_reach says whether a pixel at offset off within its block (at
// block index at, of a tile size pixels long in that direction) lies
// within buffer of the neighbouring block d (-1 before, 0 its own, 1
// after) that the tile has.
__device__ __forceinline__ bool draw_reach(int d, long long at, long long off, long long size, int block, int buffer) {
    if (d < 0) return off < buffer && at > 0;
    if (d > 0) return off >= block - buffer && (at + 1) * block < size;
    return true;
}

// draw_pixel says whether pixel i (row r, column c) of a width × height
// tile is a candidate: its reservoir (the code's training reservoir, or
// its validation one when its block went to validation), its key, or
// DRAW_NONE when its code is outside the scheme or a band is nodata
// (missing is a 65536-bit set of nodata DNs), or DRAW_BUFFERED when it is
// a training candidate within buffer pixels (Chebyshev) of a validation
// block (buffer < block: only the eight neighbouring blocks can be).
// splitBase and keyBase are the input's hashes (sampling.drawRule's
// splitsOf and keyBase).
__device__ __forceinline__ unsigned int draw_pixel(const unsigned char* __restrict__ labels,
                                                   const unsigned short* __restrict__ dn, int nb, long long plane,
                                                   int width, long long i, long long r, long long c,
                                                   const unsigned short* __restrict__ res2,
                                                   const unsigned int* __restrict__ missing,
                                                   unsigned long long splitBase, unsigned long long keyBase,
                                                   int block, int buffer, double valFrac, unsigned long long* key) {
    unsigned int k = res2[labels[i]];
    if (k == DRAW_NONE) return DRAW_NONE;
    for (int b = 0; b < nb; b++) {
        unsigned int v = dn[b * plane + i];
        if ((missing[v >> 5] >> (v & 31)) & 1u) return DRAW_NONE;
    }
    long long br = r / block, bc = c / block;
    if (draw_validation(splitBase, br, bc, valFrac)) {
        k |= 1u;
    } else if (buffer > 0) {
        long long height = plane / width, dr = r % block, dc = c % block;
        for (int dy = -1; dy <= 1; dy++) {
            if (!draw_reach(dy, br, dr, height, block, buffer)) continue;
            for (int dx = -1; dx <= 1; dx++) {
                if ((dy != 0 || dx != 0) && draw_reach(dx, bc, dc, width, block, buffer) &&
                    draw_validation(splitBase, br + dy, bc + dx, valFrac))
                    return DRAW_BUFFERED;
            }
        }
    }
    *key = extend64(extend64(keyBase, (unsigned long long)r), (unsigned long long)c);
    return k;
}

// draw_count is the draw's first pass: every candidate's key counted in
// its reservoir's histogram of the key's top bits (hist[k << bits | top]),
// the pixels whose code is outside the scheme counted by code (off[code],
// through a block's shared counts), and the training candidates the
// buffer drops (off[256]).
extern "C" __global__ void draw_count(const unsigned char* __restrict__ labels, const unsigned short* __restrict__ dn,
                                      int nb, int width, long long n, const unsigned short* __restrict__ res2,
                                      const unsigned int* __restrict__ missing, unsigned long long splitBase,
                                      unsigned long long keyBase, int block, int buffer, unsigned long long valFracBits,
                                      int bits, unsigned int* __restrict__ hist, unsigned long long* __restrict__ off) {
    __shared__ unsigned int soff[257];
    for (int j = threadIdx.x; j < 257; j += blockDim.x) soff[j] = 0;
    __syncthreads();
    double valFrac = __longlong_as_double((long long)valFracBits);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned char code = labels[i];
        if (res2[code] == DRAW_NONE) {
            atomicAdd(&soff[code], 1u);
            continue;
        }
        unsigned long long key;
        unsigned int k = draw_pixel(labels, dn, nb, n, width, i, i / width, i % width, res2, missing, splitBase,
                                    keyBase, block, buffer, valFrac, &key);
        if (k == DRAW_BUFFERED)
            atomicAdd(&soff[256], 1u);
        else if (k != DRAW_NONE)
            atomicAdd(&hist[((unsigned long long)k << bits) | (key >> (64 - bits))], 1u);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < 257; j += blockDim.x)
        if (soff[j]) atomicAdd(&off[j], (unsigned long long)soff[j]);
}

// draw_collect is the second pass: every candidate whose key is at most
// its reservoir's bound is written, in no particular order, to its
// reservoir's part of the output (from start[k], the place taken through
// fill[k]): its key, its id (input << 40 | row << 20 | column), its
// reservoir and its bands' DNs (nb a candidate).
extern "C" __global__ void draw_collect(const unsigned char* __restrict__ labels, const unsigned short* __restrict__ dn,
                                        int nb, int width, long long n, const unsigned short* __restrict__ res2,
                                        const unsigned int* __restrict__ missing, unsigned long long splitBase,
                                        unsigned long long keyBase, int block, int buffer,
                                        unsigned long long valFracBits, unsigned long long input, const unsigned long long* __restrict__ bound,
                                        const unsigned int* __restrict__ start, unsigned int* __restrict__ fill,
                                        unsigned long long* __restrict__ outKey, unsigned long long* __restrict__ outID,
                                        unsigned short* __restrict__ outRes, unsigned short* __restrict__ outDN) {
    double valFrac = __longlong_as_double((long long)valFracBits);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long r = i / width, c = i % width;
        unsigned long long key;
        unsigned int k = draw_pixel(labels, dn, nb, n, width, i, r, c, res2, missing, splitBase, keyBase, block, buffer,
                                    valFrac, &key);
        if (k == DRAW_NONE || k == DRAW_BUFFERED || key > bound[k]) continue;
        unsigned int at = start[k] + atomicAdd(&fill[k], 1u);
        outKey[at] = key;
        outID[at] = (input << 40) | ((unsigned long long)r << 20) | (unsigned long long)c;
        outRes[at] = (unsigned short)k;
        for (int b = 0; b < nb; b++) outDN[(long long)at * nb + b] = dn[b * n + i];
    }
}

// place_u16 copies nplanes planes of a w × h window (contiguous, one after
// the other) into planes of a tile dstW pixels wide and plane pixels a
// plane, at column x and row y.
extern "C" __global__ void place_u16(const unsigned short* __restrict__ src, int w, int h, int nplanes,
                                     unsigned short* __restrict__ dst, int dstW, long long plane, int x, int y) {
    long long n = (long long)w * h * nplanes;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long p = i / ((long long)w * h), j = i % ((long long)w * h);
        long long r = j / w, c = j % w;
        dst[p * plane + (y + r) * dstW + x + c] = src[i];
    }
}

// place_u8 copies a w × h window of bytes into a tile dstW pixels wide,
// at column x and row y.
extern "C" __global__ void place_u8(const unsigned char* __restrict__ src, int w, int h,
                                    unsigned char* __restrict__ dst, int dstW, int x, int y) {
    long long n = (long long)w * h;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long r = i / w, c = i % w;
        dst[(y + r) * dstW + x + c] = src[i];
    }
}

// mirror_block copies a w × h block at column x and row y of a mirrored
// tile (planes of plane pixels, tileW wide) into dst, contiguous: the
// planes whose bits are set in used (up to 32), in ascending order, one
// after the other. It is place_u16 the other way, for the predictor,
// which reads a window with its halo from the device's own copy of the
// tile.
extern "C" __global__ void mirror_block(const unsigned short* __restrict__ src, int tileW, long long plane,
                                        unsigned int used, int x, int y, int w, int h,
                                        unsigned short* __restrict__ dst) {
    long long wh = (long long)w * h;
    long long n = wh * __popc(used);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int k = (int)(i / wh);
        long long j = i % wh;
        // The k-th set bit of used is the plane.
        unsigned int m = used;
        for (int s = 0; s < k; s++) m &= m - 1;
        int p = __ffs(m) - 1;
        long long r = j / w, c = j % w;
        dst[i] = src[p * plane + (y + r) * tileW + x + c];
    }
}

// mirror_valid marks the pixels of a w × h window at column x and row y of
// a mirrored tile (tileW wide, plane pixels a plane) that hold data in
// each of its first nplanes planes (DN 0 is nodata): out is 1 there and 0
// elsewhere, as package inference's readers mark a window's validity.
extern "C" __global__ void mirror_valid(const unsigned short* __restrict__ src, int tileW, long long plane,
                                        int nplanes, int x, int y, int w, int h,
                                        unsigned char* __restrict__ out) {
    long long n = (long long)w * h;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long r = i / w, c = i % w;
        const unsigned short* at = src + (y + r) * tileW + x + c;
        unsigned char v = 1;
        for (int p = 0; p < nplanes; p++) {
            if (at[p * plane] == 0) {
                v = 0;
                break;
            }
        }
        out[i] = v;
    }
}

// ---------------------------------------------------------------------
// Area of applicability (package aoa): the dissimilarity index.
// ---------------------------------------------------------------------

// aoa_near is aoa.Reference.Transform and aoa's nearest search (brute
// force) for n pixels, over one share of the training points: pixel i's
// features are feats[f * stride + p] with p = pixels[i] (p = i when
// pixels is null). Each feature is standardised and weighted, z = (x −
// mean) × scale; the squared distance to every training point of the
// share (blockIdx.y's of gridDim.y, npoints × nf, row-major) is summed in
// feature order from 0, each product and sum rounded on its own: the
// same operations in the same order as the Go code, so the same bits.
// The smallest joins best[i] by atomicMin on its bits (a distance is
// never negative, and non-negative doubles order as their bits do), so
// the shares may finish in any order; a pixel with a NaN feature leaves
// best[i] at its initial all-ones. Splitting the points across blocks
// keeps every multiprocessor busy when a window has few pixels to
// measure. The block stages tiles of points in shared memory, every
// thread helping, and each thread compares its pixel with the whole tile.
#define AOA_BLOCK 256
#define AOA_MAX_FEATURES 64
#define AOA_TILE 4096
extern "C" __global__ void __launch_bounds__(AOA_BLOCK) aoa_near(const float* __restrict__ feats, int nf, long long stride,
                                                                 const int* __restrict__ pixels, long long n,
                                                                 const double* __restrict__ points, int npoints,
                                                                 const double* __restrict__ mean, const double* __restrict__ scale,
                                                                 unsigned long long* __restrict__ best) {
    __shared__ double tile[AOA_TILE];
    int per = AOA_TILE / nf;
    int share = (npoints + gridDim.y - 1) / gridDim.y;
    int p0 = min(npoints, (int)blockIdx.y * share), p1 = min(npoints, p0 + share);
    long long gstride = (long long)gridDim.x * blockDim.x;
    // Every thread of a block runs the same rounds (base is the block's),
    // so all of them reach the barriers around the tile loads.
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += gstride) {
        long long i = base + threadIdx.x;
        bool live = i < n, nan = false;
        double z[AOA_MAX_FEATURES];
        // The feature loops run to the compile-time bound, guarded, so
        // that z stays in registers (a loop to nf would index it at run
        // time, in local memory); the order of the sums is the same.
        if (live) {
            long long p = pixels ? (long long)pixels[i] : i;
#pragma unroll
            for (int f = 0; f < AOA_MAX_FEATURES; f++) {
                z[f] = 0.0;
                if (f < nf) {
                    double v = __dmul_rn(__dsub_rn((double)feats[f * stride + p], mean[f]), scale[f]);
                    if (v != v) nan = true;
                    z[f] = v;
                }
            }
        }
        double near = __longlong_as_double(0x7ff0000000000000LL);
        for (int t0 = p0; t0 < p1; t0 += per) {
            int m = min(per, p1 - t0);
            __syncthreads();
            for (int k = threadIdx.x; k < m * nf; k += blockDim.x) tile[k] = points[(long long)t0 * nf + k];
            __syncthreads();
            if (live && !nan) {
                for (int j = 0; j < m; j++) {
                    const double* q = tile + j * nf;
                    double s = 0.0;
#pragma unroll
                    for (int f = 0; f < AOA_MAX_FEATURES; f++) {
                        if (f < nf) {
                            double d = __dsub_rn(z[f], q[f]);
                            s = __dadd_rn(s, __dmul_rn(d, d));
                        }
                    }
                    if (s < near) near = s;
                }
            }
        }
        if (live && !nan) atomicMin(best + i, (unsigned long long)__double_as_longlong(near));
    }
}

// aoa_finish is aoa.Reference.DI from the nearest squared distances:
// out[i] = float(sqrt(best) / meanDist), rounded once, or NaN for a pixel
// aoa_near left at all-ones.
extern "C" __global__ void aoa_finish(const unsigned long long* __restrict__ best, long long n, long long meanDistBits,
                                      float* __restrict__ out) {
    double md = __longlong_as_double(meanDistBits);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long b = best[i];
        out[i] = b == ~0ULL ? NAN_F : __double2float_rn(__ddiv_rn(__dsqrt_rn(__longlong_as_double((long long)b)), md));
    }
}

// aoa_pairs is aoa's pairs, the measure of a Reference's training points
// among themselves, one point a thread: point i's distance to every
// other point (npoints × nf, row-major), the squares of the differences
// added in feature order from 0, each operation rounded on its own (as
// aoa's dist2; (a − b)² and (b − a)² are the same bits, so the pair's
// distance is the same from either end). rows[i] sums sqrt(d²) over the
// points after i, in their order, as the CPU sums a row; cv[i] is the
// smallest d² to a point of another fold (+Inf when none), the minimum
// not depending on the order. The threads of a warp read the same point
// at once.
extern "C" __global__ void __launch_bounds__(AOA_BLOCK) aoa_pairs(const double* __restrict__ p, int nf, int npoints,
                                                                  const unsigned long long* __restrict__ fold,
                                                                  double* __restrict__ rows, double* __restrict__ cv) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npoints) return;
    const double* a = p + (long long)i * nf;
    unsigned long long fi = fold[i];
    double sum = 0.0;
    double best = __longlong_as_double(0x7ff0000000000000LL);
    // Four points at a time: their distances are four independent chains
    // of adds, which keep the double-precision units busy where one chain
    // would wait on each add; then they are taken one by one, in order.
    int j = 0;
    for (; j + 4 <= npoints; j += 4) {
        const double* b = p + (long long)j * nf;
        double e[4] = {0.0, 0.0, 0.0, 0.0};
        for (int f = 0; f < nf; f++) {
            double af = a[f];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                double d = __dsub_rn(af, b[k * nf + f]);
                e[k] = __dadd_rn(e[k], __dmul_rn(d, d));
            }
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int jk = j + k;
            if (jk == i) continue;
            if (jk > i) sum = __dadd_rn(sum, __dsqrt_rn(e[k]));
            if (fold[jk] != fi && e[k] < best) best = e[k];
        }
    }
    for (; j < npoints; j++) {
        if (j == i) continue;
        const double* b = p + (long long)j * nf;
        double d2 = 0.0;
        for (int f = 0; f < nf; f++) {
            double d = __dsub_rn(a[f], b[f]);
            d2 = __dadd_rn(d2, __dmul_rn(d, d));
        }
        if (j > i) sum = __dadd_rn(sum, __dsqrt_rn(d2));
        if (fold[j] != fi && d2 < best) best = d2;
    }
    rows[i] = sum;
    cv[i] = best;
}

// ---------------------------------------------------------------------
// Class rasters onto another grid (package classrule): lulc's rule for
// labels, the same bytes as classrule.Window.Apply.
// ---------------------------------------------------------------------

// rule_corner is the lattice's bilinear interpolation at a pixel edge
// (lattice cells lx, ly, places fx, fy), in Apply's order: across the
// cell's top and bottom rows, then down between them.
__device__ __forceinline__ double rule_corner(const double* __restrict__ u, int nx, int lx, double fx, int ly, double fy) {
    int k = ly * nx + lx;
    double t = __dadd_rn(u[k], __dmul_rn(__dsub_rn(u[k + 1], u[k]), fx));
    double b = __dadd_rn(u[k + nx], __dmul_rn(__dsub_rn(u[k + nx + 1], u[k + nx]), fx));
    return __dadd_rn(t, __dmul_rn(__dsub_rn(b, t), fy));
}

// rule_floor and rule_ceil are classrule.Floor and Ceil: a truncation
// corrected by one (exact for the tame lattices the host sends).
__device__ __forceinline__ long long rule_floor(double x) {
    long long i = (long long)x;
    return (double)i > x ? i - 1 : i;
}

__device__ __forceinline__ long long rule_ceil(double x) {
    long long i = (long long)x;
    return (double)i < x ? i + 1 : i;
}

// rule_lower and rule_upper are classrule.Lower and Upper (NaN wins).
__device__ __forceinline__ double rule_lower(double a, double b) { return (b < a || b != b) ? b : a; }
__device__ __forceinline__ double rule_upper(double a, double b) { return (b > a || b != b) ? b : a; }

// rule_vote is classrule.Window.Vote over the box of columns c0..c1 and
// rows r0..r1 (both non-empty): the most votes win, a tie the value met
// first reading the box row by row; nodata (when the source has it) does
// not vote, and wins when nothing does. A small box, which is nearly
// every box, counts each value at its first pixel with no table; a
// large one keeps Vote's table of counts in local memory.
__device__ int rule_vote(const unsigned char* __restrict__ src, int sw, int c0, int c1, int r0, int r1, int nodata, int hasNodata) {
    int best = nodata, bestN = 0;
    int cols = c1 - c0;
    if ((long long)cols * (r1 - r0) <= 64) {
        for (int r = r0; r < r1; r++) {
            for (int c = c0; c < c1; c++) {
                int val = src[(long long)r * sw + c];
                if (hasNodata && val == nodata) {
                    continue;
                }
                // A value met before in the box was counted there.
                bool seen = false;
                for (int rr = r0; rr <= r && !seen; rr++) {
                    int end = rr == r ? c : c1;
                    for (int cc = c0; cc < end; cc++) {
                        if (src[(long long)rr * sw + cc] == val) {
                            seen = true;
                            break;
                        }
                    }
                }
                if (seen) {
                    continue;
                }
                int n = 0;
                for (int rr = r; rr < r1; rr++) {
                    for (int cc = rr == r ? c : c0; cc < c1; cc++) {
                        n += src[(long long)rr * sw + cc] == val;
                    }
                }
                if (n > bestN) {
                    best = val;
                    bestN = n;
                }
            }
        }
        return best;
    }
    unsigned int counts[256];
    unsigned char order[256];
    int touched = 0;
    for (int k = 0; k < 256; k++) {
        counts[k] = 0;
    }
    for (int r = r0; r < r1; r++) {
        for (int c = c0; c < c1; c++) {
            int val = src[(long long)r * sw + c];
            if (hasNodata && val == nodata) {
                continue;
            }
            if (counts[val]++ == 0) {
                order[touched++] = (unsigned char)val;
            }
        }
    }
    for (int t = 0; t < touched; t++) {
        int val = order[t];
        if ((int)counts[val] > bestN) {
            best = val;
            bestN = counts[val];
        }
    }
    return best;
}

// class_rule maps a source window (sw × sh classes) onto a w × h grid by
// the rule, a thread a destination pixel: its four corners from the
// lattice (u, v: nx nodes a row, in the window's pixel space; lxs, fxs
// and lys, fys each edge's lattice cell and place, classrule.Edges), then
// nearest (mode 0) or mode (1). Footprints outside the window get
// nodata.
extern "C" __global__ void class_rule(const unsigned char* __restrict__ src, int sw, int sh,
                                      const double* __restrict__ u, const double* __restrict__ v, int nx,
                                      const int* __restrict__ lxs, const double* __restrict__ fxs,
                                      const int* __restrict__ lys, const double* __restrict__ fys,
                                      int w, int h, int mode, int nodata, int hasNodata,
                                      unsigned char* __restrict__ out) {
    long long n = (long long)w * h;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int y = (int)(i / w), x = (int)(i % w);
        int la = lxs[x], lb = lxs[x + 1], ta = lys[y], tb = lys[y + 1];
        double fa = fxs[x], fb = fxs[x + 1], ga = fys[y], gb = fys[y + 1];
        // Corners: a is the pixel's top edge, b its bottom; 0 its left,
        // 1 its right.
        double ua0 = rule_corner(u, nx, la, fa, ta, ga), ua1 = rule_corner(u, nx, lb, fb, ta, ga);
        double ub0 = rule_corner(u, nx, la, fa, tb, gb), ub1 = rule_corner(u, nx, lb, fb, tb, gb);
        double va0 = rule_corner(v, nx, la, fa, ta, ga), va1 = rule_corner(v, nx, lb, fb, ta, ga);
        double vb0 = rule_corner(v, nx, la, fa, tb, gb), vb1 = rule_corner(v, nx, lb, fb, tb, gb);
        int val = nodata;
        if (!mode) {
            double cu = __ddiv_rn(__dadd_rn(__dadd_rn(__dadd_rn(ua0, ua1), ub0), ub1), 4.0);
            double cv = __ddiv_rn(__dadd_rn(__dadd_rn(__dadd_rn(va0, va1), vb0), vb1), 4.0);
            long long c = rule_floor(cu), r = rule_floor(cv);
            if (c >= 0 && c < sw && r >= 0 && r < sh) {
                val = src[r * sw + c];
            }
        } else {
            long long c0 = max(min(rule_floor(__dadd_rn(rule_lower(ua0, ub0), 1e-10)), rule_floor(__dadd_rn(rule_lower(ua1, ub1), 1e-10))), 0LL);
            long long c1 = min(max(rule_ceil(__dsub_rn(rule_upper(ua0, ub0), 1e-10)), rule_ceil(__dsub_rn(rule_upper(ua1, ub1), 1e-10))), (long long)sw);
            long long r0 = max(min(rule_floor(__dadd_rn(rule_lower(va0, vb0), 1e-10)), rule_floor(__dadd_rn(rule_lower(va1, vb1), 1e-10))), 0LL);
            long long r1 = min(max(rule_ceil(__dsub_rn(rule_upper(va0, vb0), 1e-10)), rule_ceil(__dsub_rn(rule_upper(va1, vb1), 1e-10))), (long long)sh);
            if (c0 < c1 && r0 < r1) {
                val = rule_vote(src, sw, (int)c0, (int)c1, (int)r0, (int)r1, nodata, hasNodata);
            }
        }
        out[i] = (unsigned char)val;
    }
}
