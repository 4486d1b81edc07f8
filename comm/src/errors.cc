#include "hpu/comm/errors.h"
