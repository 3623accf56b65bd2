// torch2cuda/softmax, adversarial: an empty kernel; y keeps its NaN poison (INCORRECT).
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        int rows, int cols) {}
