/* cuda_bwprobe.cu: gt-cuda-bwprobe, the measured memory bandwidth of a CUDA
 * device: the ceiling that ci/device-check.sh judges decode bandwidth by.
 *
 * Two numbers, each the best of several timed repetitions (CUDA events)
 * after a warm-up, over buffers far larger than L2:
 *   copy  cudaMemcpyAsync device to device, counting bytes read + written
 *   read  a streaming kernel that only reads (what decode mostly does)
 * The last line is machine-readable: "GT_BW copy=<GB/s> read=<GB/s>".
 *
 * usage: gt-cuda-bwprobe [device] [MiB per buffer, default 1024]
 * exit: 0 measured, 1 a CUDA call failed, 3 no CUDA device (the reason is
 * printed), 2 usage. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                            \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "gt-cuda-bwprobe: %s: error %d (%s): %s\n", #call, (int)e_,        \
                    cudaGetErrorName(e_), cudaGetErrorString(e_));                             \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

/* Sums float4s so the loads cannot be optimized away; one word is written
 * per block. */
__global__ void read_kernel(const float4 *p, size_t n, float *sink)
{
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.678f) /* practically never: keeps the sum live */
        sink[blockIdx.x] = s;
}

int main(int argc, char **argv)
{
    const int dev = argc > 1 ? atoi(argv[1]) : 0;
    const long mib = argc > 2 ? atol(argv[2]) : 1024;
    if (argc > 3 || mib <= 0) {
        fprintf(stderr, "usage: gt-cuda-bwprobe [device] [MiB per buffer]\n");
        return 2;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
        return 3;
    }
    CHECK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    size_t fr = 0, total = 0;
    CHECK(cudaMemGetInfo(&fr, &total));
    size_t bytes = (size_t)mib << 20;
    if (bytes * 2 > fr / 2) /* leave half of what is free */
        bytes = (fr / 4) & ~(size_t)0xfffff;
    void *a = NULL, *b = NULL;
    float *sink = NULL;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc((void **)&sink, 4096 * sizeof(float)));
    CHECK(cudaMemset(a, 0, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));

    const int reps = 10;
    float best_copy = 1e30f, best_read = 1e30f, ms = 0.0f;
    for (int r = 0; r <= reps; r++) { /* r == 0 warms up */
        CHECK(cudaEventRecord(t0));
        CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(t1));
        CHECK(cudaEventSynchronize(t1));
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        if (r && ms < best_copy)
            best_copy = ms;
    }
    const int blocks = prop.multiProcessorCount * 8 < 4096 ? prop.multiProcessorCount * 8 : 4096;
    for (int r = 0; r <= reps; r++) {
        CHECK(cudaEventRecord(t0));
        read_kernel<<<blocks, 512>>>((const float4 *)a, bytes / sizeof(float4), sink);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(t1));
        CHECK(cudaEventSynchronize(t1));
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        if (r && ms < best_read)
            best_read = ms;
    }
    const double copy_gbs = 2.0 * bytes / (best_copy * 1e-3) / 1e9;
    const double read_gbs = (double)bytes / (best_read * 1e-3) / 1e9;
    printf("device %d: %s (compute capability %d.%d, %zu MiB)\n", dev, prop.name, prop.major,
           prop.minor, total >> 20);
    printf("copy: %.1f GB/s (device to device, read + write, %zu MiB, best of %d)\n", copy_gbs,
           bytes >> 20, reps);
    printf("read: %.1f GB/s (streaming read kernel, %d blocks of 512)\n", read_gbs, blocks);
    printf("GT_BW copy=%.1f read=%.1f\n", copy_gbs, read_gbs);
    CHECK(cudaEventDestroy(t0));
    CHECK(cudaEventDestroy(t1));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(sink));
    return 0;
}
