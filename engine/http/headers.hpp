// HTTP header fields as received or to be sent: an ordered list of
// name/value pairs with case-insensitive lookup by name. Repeated fields are
// kept as separate entries in arrival order (a server may send several
// `RateLimit-Policy` or `Set-Cookie` lines), so nothing is lost by merging.
//
// Thread-safety: a plain value; concurrent reads are safe, writes are not.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ratchet::http {

// ASCII case-insensitive equality, as HTTP field names compare.
bool iequals(std::string_view a, std::string_view b) noexcept;

class Headers {
 public:
  using Field = std::pair<std::string, std::string>;

  Headers() = default;
  Headers(std::initializer_list<Field> fields) : fields_(fields) {}
  explicit Headers(std::vector<Field> fields) : fields_(std::move(fields)) {}

  void add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }

  // The value of the first field with this name, if any.
  std::optional<std::string_view> get(std::string_view name) const noexcept;
  // Every value of fields with this name, in arrival order.
  std::vector<std::string_view> get_all(std::string_view name) const;
  bool contains(std::string_view name) const noexcept { return get(name).has_value(); }

  const std::vector<Field>& fields() const noexcept { return fields_; }
  std::vector<Field>::const_iterator begin() const noexcept { return fields_.begin(); }
  std::vector<Field>::const_iterator end() const noexcept { return fields_.end(); }
  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }
  void clear() noexcept { fields_.clear(); }

  friend bool operator==(const Headers&, const Headers&) = default;

 private:
  std::vector<Field> fields_;
};

}  // namespace ratchet::http
