// Validation errors of an options struct, reworded for the command line.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

#include "star/core/status.h"

namespace star::cli {

// `s` with the field its message starts with ("onset_window: must be ...") named as its
// flag: the flag `renamed` gives for it, else "--" and the field with '-' for '_'
// ("--onset-window: must be ..."). The code is kept; OK stays OK.
Status AsFlagError(const Status& s,
                   std::initializer_list<std::pair<std::string_view, std::string_view>> renamed = {});

}  // namespace star::cli
