// Placeholder: filled in by the sizing work of issue 5.
#include "sizing/memory.h"
