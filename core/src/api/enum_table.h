// Internal: enum <-> wire-name tables for the api codecs.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace star::api::internal {

template <typename E, size_t N>
using EnumTable = std::array<std::pair<E, std::string_view>, N>;

template <typename E, size_t N>
std::string_view EnumName(const EnumTable<E, N>& table, E e) {
  for (const auto& [v, s] : table) {
    if (v == e) return s;
  }
  return "unknown";
}

template <typename E, size_t N>
std::optional<E> EnumParse(const EnumTable<E, N>& table, std::string_view s) {
  for (const auto& [v, name] : table) {
    if (name == s) return v;
  }
  return std::nullopt;
}

}  // namespace star::api::internal
