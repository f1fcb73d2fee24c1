# embed_cl.cmake: turns one OpenCL C source into a C header holding it as a
# NUL-terminated byte array (hex, so no escaping rules can bite).
#   cmake -DIN=kernels/x.cl -DOUT=kernel_x.h -DNAME=x -P embed_cl.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
file(WRITE ${OUT}.tmp "/* Generated from ${IN} by embed_cl.cmake; do not edit. */\n"
     "static const char gt_ocl_src_${NAME}[] = {\n${bytes}0x00};\n")
file(RENAME ${OUT}.tmp ${OUT})
