// Test support: a temporary directory removed, with everything in it, at scope exit.
#pragma once

#include "star/test_support/temp_dir.h"

namespace star::agent::testing_support {

using TempDir = star::test_support::TempDir;

}  // namespace star::agent::testing_support
