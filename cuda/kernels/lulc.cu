// lulc's CUDA kernels: the GPU twins of features.CPU, composite.Median and
// forest.Bins. Each must give the same bits as its Go reference, so every
// float operation is an explicitly rounded intrinsic (no contraction into
// FMA, IEEE division) and the order of operations follows the Go code.
// Compile with: nvcc -ptx --fmad=false -arch=compute_75 (see gen.sh).

#define NAN_F __int_as_float(0x7fc00000)

// nd is the normalised difference (a − b) / (a + b); NaN when a + b == 0.
__device__ __forceinline__ float nd(float a, float b) {
    float den = __fadd_rn(a, b);
    if (den == 0.0f) return NAN_F;
    return __fdiv_rn(__fsub_rn(a, b), den);
}

// Feature operations, as in features.Op.
enum { OP_BAND = 0, OP_ND = 1, OP_EVI = 2, OP_SAVI = 3, OP_BSI = 4 };

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
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        long long i = base + threadIdx.x;
        if (i < n) {
            for (int b = 0; b < nbands; b++) px[b * FEATURE_BLOCK + threadIdx.x] = bands[(long long)b * n + i];
            for (int f = 0; f < nfeat; f++) {
                const int* p = sprog + 5 * f;
                int op = p[0];
                int ninputs = op == OP_BAND ? 1 : op == OP_EVI ? 3 : op == OP_BSI ? 4 : 2;
                float v[4];
                bool nan = false;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    v[k] = 0.0f;
                    if (k < ninputs) {
                        v[k] = px[p[1 + k] * FEATURE_BLOCK + threadIdx.x];
                        nan = nan || (v[k] != v[k]);
                    }
                }
                float r;
                if (nan) {
                    r = NAN_F;
                } else if (op == OP_BAND) {
                    r = v[0];
                } else if (op == OP_ND) {
                    r = nd(v[0], v[1]);
                } else if (op == OP_EVI) {
                    // 2.5 (n − r) / (n + 6 r − 7.5 b + 1)
                    float den = __fadd_rn(__fsub_rn(__fadd_rn(v[0], __fmul_rn(6.0f, v[1])), __fmul_rn(7.5f, v[2])), 1.0f);
                    r = den == 0.0f ? NAN_F : __fdiv_rn(__fmul_rn(2.5f, __fsub_rn(v[0], v[1])), den);
                } else if (op == OP_SAVI) {
                    // 1.5 (n − r) / (n + r + 0.5)
                    float den = __fadd_rn(__fadd_rn(v[0], v[1]), 0.5f);
                    r = den == 0.0f ? NAN_F : __fdiv_rn(__fmul_rn(1.5f, __fsub_rn(v[0], v[1])), den);
                } else {
                    // bsi = nd(swir1 + red, nir + blue)
                    r = nd(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3]));
                }
                if (r != r) r = NAN_F;
                out[(long long)f * n + i] = r;
            }
        }
    }
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
        float m;
        if (k == 0) {
            m = NAN_F;
        } else if (k % 2 == 1) {
            m = buf[k / 2];
        } else {
            m = __fmul_rn(__fadd_rn(buf[k / 2 - 1], buf[k / 2]), 0.5f);
            if (m != m) m = NAN_F;
        }
        out[i] = m;
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
// from node_off[t]; probs likewise from prob_off[t] (floats).
#define FOREST_BLOCK 128
#define MAX_FEATURES 64
#define MAX_CLASSES 32
extern "C" __global__ void __launch_bounds__(FOREST_BLOCK) forest_predict(
    const unsigned char* __restrict__ codes, int nfeat, long long n,
    const int2* __restrict__ nodes, const int* __restrict__ node_off,
    const float* __restrict__ probs, const int* __restrict__ prob_off,
    int ntrees, int nclasses, float inv,
    unsigned char* __restrict__ cls, float* __restrict__ conf) {
    __shared__ unsigned char row[MAX_FEATURES * FOREST_BLOCK];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        long long i = base + threadIdx.x;
        if (i >= n) continue;
        for (int f = 0; f < nfeat; f++) row[f * FOREST_BLOCK + threadIdx.x] = codes[(long long)f * n + i];
        float acc[MAX_CLASSES];
        for (int c = 0; c < nclasses; c++) acc[c] = 0.0f;
        for (int t = 0; t < ntrees; t++) {
            const int2* tn = nodes + node_off[t];
            int2 nd = tn[0];
            while ((short)(nd.x & 0xffff) >= 0) {
                int feat = (short)(nd.x & 0xffff);
                int bin = (nd.x >> 16) & 0xff;
                int next = nd.y + (row[feat * FOREST_BLOCK + threadIdx.x] > bin ? 1 : 0);
                nd = tn[next];
            }
            const float* p = probs + prob_off[t] + (long long)nd.y * nclasses;
            for (int c = 0; c < nclasses; c++) acc[c] = __fadd_rn(acc[c], p[c]);
        }
        int best = 0;
        for (int c = 0; c < nclasses; c++) {
            acc[c] = __fmul_rn(acc[c], inv);
            if (c > 0 && acc[c] > acc[best]) best = c;
        }
        cls[i] = (unsigned char)best;
        conf[i] = acc[best];
    }
}
