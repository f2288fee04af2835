// Placeholder: filled in by the sizing work of issue 5.
#include "sizing/devices.h"
