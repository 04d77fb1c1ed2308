// cuda_grad_colsum.cuh: column sums for the training kernels
// (cuda_grad.cu): few outputs, each summed over many rows, as sum_to with
// the last axis kept and the layer and rms norm weight gradients need. A
// loader struct says where the values of a row and column are and where a
// column's sums go:
//
//   struct my_ld { static constexpr int NV = 1;
//       __device__ void load(int64_t row, int64_t col, float *v) const;
//       __device__ void store(int64_t col, const float *v) const; };
//   if (colsum(c, my_ld{...}, ncols, nrows, "my_op<<<>>>") < 0) return -1;
#pragma once
#include "cuda_grad.cuh"

#define CS_X 32 // columns a block (consecutive outputs: coalesced reads)
#define CS_Y 16 // row lanes a block

// A loader L gives L::NV values at (row, column) and stores the NV sums of
// a column. Rows split over gridDim.y blocks leave partial sums in part
// ((split, NV, ncols) floats), which colsum_fin_k adds in split order.
template <typename L>
__global__ void __launch_bounds__(CS_X *CS_Y)
    colsum_k(L ld, int64_t ncols, int64_t nrows, float *part) {
    __shared__ float sh[L::NV][CS_Y][CS_X + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t tile = blockIdx.x; tile * CS_X < ncols; tile += gridDim.x) {
        int64_t col = tile * CS_X + tx;
        float acc[L::NV];
        for (int k = 0; k < L::NV; k++)
            acc[k] = 0.0f;
        if (col < ncols)
            for (int64_t r = (int64_t)blockIdx.y * CS_Y + ty; r < nrows;
                 r += (int64_t)gridDim.y * CS_Y) {
                float v[L::NV];
                ld.load(r, col, v);
                for (int k = 0; k < L::NV; k++)
                    acc[k] += v[k];
            }
        for (int k = 0; k < L::NV; k++)
            sh[k][ty][tx] = acc[k];
        __syncthreads();
        if (ty == 0 && col < ncols) {
            float s[L::NV];
            for (int k = 0; k < L::NV; k++) {
                s[k] = 0.0f;
                for (int y = 0; y < CS_Y; y++)
                    s[k] += sh[k][y][tx];
            }
            if (gridDim.y == 1)
                ld.store(col, s);
            else
                for (int k = 0; k < L::NV; k++)
                    part[((int64_t)blockIdx.y * L::NV + k) * ncols + col] = s[k];
        }
        __syncthreads(); // sh is written again by the next tile
    }
}

template <typename L>
__global__ void colsum_fin_k(L ld, int64_t ncols, int splits, const float *part) {
    for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < ncols;
         col += (int64_t)gridDim.x * blockDim.x) {
        float s[L::NV];
        for (int k = 0; k < L::NV; k++) {
            s[k] = 0.0f;
            for (int sp = 0; sp < splits; sp++)
                s[k] += part[((int64_t)sp * L::NV + k) * ncols + col];
        }
        ld.store(col, s);
    }
}

// Enough blocks to fill the GPU twice: the rows are split when the column
// tiles are fewer, each split keeping at least 64 rows.
template <typename L>
static int colsum(cuda_ctx *c, const L &ld, int64_t ncols, int64_t nrows, const char *name) {
    if (ncols <= 0)
        return 0;
    int64_t tiles = (ncols + CS_X - 1) / CS_X, want = 2 * (c->sm_count > 0 ? c->sm_count : 1);
    int64_t splits = 1;
    if (tiles < want) {
        splits = (want + tiles - 1) / tiles;
        if (splits > nrows / 64)
            splits = nrows / 64;
        if (splits > 65535)
            splits = 65535;
        if (splits < 1)
            splits = 1;
    }
    float *part = NULL;
    if (splits > 1 &&
        !(part = (float *)cuda_scratch_get(c, (size_t)(splits * L::NV * ncols) * sizeof(float))))
        return -1;
    dim3 grid(grad_grid(tiles), (unsigned)splits), block(CS_X, CS_Y);
    colsum_k<L><<<grid, block, 0, c->stream>>>(ld, ncols, nrows, part);
    int rc = cuda_launched(c, name, __FILE__, __LINE__);
    if (rc == 0 && splits > 1) {
        colsum_fin_k<L>
            <<<grad_grid((ncols + 255) / 256), 256, 0, c->stream>>>(ld, ncols, (int)splits, part);
        rc = CUDA_LAUNCHED(c, "colsum_fin<<<>>>");
    }
    if (part)
        cuda_scratch_put(c, part);
    return rc;
}
