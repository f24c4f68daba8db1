// Names of the values of a closed enum, kept in one table per enum: value k is named
// names[k]. Used for the dtype-like vocabularies of specs, stores and options.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace einsumdb {

template <class E, std::size_t N>
constexpr std::string_view enum_name(const std::array<std::string_view, N>& names, E value) {
  return names[static_cast<std::size_t>(value)];
}

template <class E, std::size_t N>
constexpr std::optional<E> enum_from_name(const std::array<std::string_view, N>& names,
                                          std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace einsumdb
