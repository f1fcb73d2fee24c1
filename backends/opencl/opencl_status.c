/* opencl_status.c: turning OpenCL status codes into messages a user can act
 * on. Every OpenCL call in the backend goes through gt_ocl_fail on error,
 * so a failure always names the call, the status by name and number, and
 * the kernel and sizes involved ("clEnqueueNDRangeKernel(matvec_q4_1,
 * global 576x1, local 4x1) failed: CL_OUT_OF_RESOURCES (-5)"). */
#include "opencl_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *gt_ocl_status_name(cl_int s)
{
    switch (s) {
#define S(x) case x: return #x;
    S(CL_SUCCESS)
    S(CL_DEVICE_NOT_FOUND)
    S(CL_DEVICE_NOT_AVAILABLE)
    S(CL_COMPILER_NOT_AVAILABLE)
    S(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    S(CL_OUT_OF_RESOURCES)
    S(CL_OUT_OF_HOST_MEMORY)
    S(CL_PROFILING_INFO_NOT_AVAILABLE)
    S(CL_MEM_COPY_OVERLAP)
    S(CL_IMAGE_FORMAT_MISMATCH)
    S(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    S(CL_BUILD_PROGRAM_FAILURE)
    S(CL_MAP_FAILURE)
    S(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    S(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    S(CL_COMPILE_PROGRAM_FAILURE)
    S(CL_LINKER_NOT_AVAILABLE)
    S(CL_LINK_PROGRAM_FAILURE)
    S(CL_DEVICE_PARTITION_FAILED)
    S(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    S(CL_INVALID_VALUE)
    S(CL_INVALID_DEVICE_TYPE)
    S(CL_INVALID_PLATFORM)
    S(CL_INVALID_DEVICE)
    S(CL_INVALID_CONTEXT)
    S(CL_INVALID_QUEUE_PROPERTIES)
    S(CL_INVALID_COMMAND_QUEUE)
    S(CL_INVALID_HOST_PTR)
    S(CL_INVALID_MEM_OBJECT)
    S(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    S(CL_INVALID_IMAGE_SIZE)
    S(CL_INVALID_SAMPLER)
    S(CL_INVALID_BINARY)
    S(CL_INVALID_BUILD_OPTIONS)
    S(CL_INVALID_PROGRAM)
    S(CL_INVALID_PROGRAM_EXECUTABLE)
    S(CL_INVALID_KERNEL_NAME)
    S(CL_INVALID_KERNEL_DEFINITION)
    S(CL_INVALID_KERNEL)
    S(CL_INVALID_ARG_INDEX)
    S(CL_INVALID_ARG_VALUE)
    S(CL_INVALID_ARG_SIZE)
    S(CL_INVALID_KERNEL_ARGS)
    S(CL_INVALID_WORK_DIMENSION)
    S(CL_INVALID_WORK_GROUP_SIZE)
    S(CL_INVALID_WORK_ITEM_SIZE)
    S(CL_INVALID_GLOBAL_OFFSET)
    S(CL_INVALID_EVENT_WAIT_LIST)
    S(CL_INVALID_EVENT)
    S(CL_INVALID_OPERATION)
    S(CL_INVALID_GL_OBJECT)
    S(CL_INVALID_BUFFER_SIZE)
    S(CL_INVALID_MIP_LEVEL)
    S(CL_INVALID_GLOBAL_WORK_SIZE)
    S(CL_INVALID_PROPERTY)
    S(CL_INVALID_IMAGE_DESCRIPTOR)
    S(CL_INVALID_COMPILER_OPTIONS)
    S(CL_INVALID_LINKER_OPTIONS)
    S(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef S
    /* ICD loader: no platform installed at all. */
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL status";
    }
}

int gt_ocl_fail(gt_err *err, const char *call, cl_int status, const char *fmt, ...)
{
    char what[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
    }
    return gt_err_set(err, "%s(%s) failed: %s (%d)", call, what, gt_ocl_status_name(status),
                      (int)status);
}

/* Drivers pad some strings with trailing spaces (PoCL's device names). */
static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s[--n] = '\0';
}

void gt_ocl_device_str(cl_device_id d, cl_device_info what, char *out, size_t cap)
{
    size_t n = 0;
    if (clGetDeviceInfo(d, what, cap, out, &n) != CL_SUCCESS || n == 0) {
        /* Too long for out (or refused): take the head of it instead. */
        char big[4096];
        if (clGetDeviceInfo(d, what, sizeof big, big, NULL) == CL_SUCCESS)
            snprintf(out, cap, "%s", big);
        else
            snprintf(out, cap, "?");
    }
    out[cap - 1] = '\0';
    trim(out);
}

void gt_ocl_platform_str(cl_platform_id p, cl_platform_info what, char *out, size_t cap)
{
    size_t n = 0;
    if (clGetPlatformInfo(p, what, cap, out, &n) != CL_SUCCESS || n == 0) {
        char big[4096];
        if (clGetPlatformInfo(p, what, sizeof big, big, NULL) == CL_SUCCESS)
            snprintf(out, cap, "%s", big);
        else
            snprintf(out, cap, "?");
    }
    out[cap - 1] = '\0';
    trim(out);
}
