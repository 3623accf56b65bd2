# Turns the file IN into a C header OUT that defines `static const char ka_hip_on_cuda_h[]`.
file(READ ${IN} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," content "${content}")
file(WRITE ${OUT} "/* generated from hip_on_cuda.h by embed.cmake */\nstatic const char ka_hip_on_cuda_h[] = {${content} 0x00};\n")
