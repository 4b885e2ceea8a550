// SKINNY_HOST_DEVICE: functions that both host code and kernels call (empty for a host-only compiler).
#pragma once

#if defined(__CUDACC__)
#define SKINNY_HOST_DEVICE __host__ __device__
#else
#define SKINNY_HOST_DEVICE
#endif
