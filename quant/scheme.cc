// placeholder: being written
#include "quant/scheme.h"
