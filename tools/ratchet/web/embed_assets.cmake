# Writes OUTPUT, a C++ file whose find_asset() returns the dashboard's files
# (ASSETS_DIR/index.html, app.css, app.js) as raw string literals, so the
# command serves them with nothing installed beside it.
# Run as: cmake -DASSETS_DIR=... -DOUTPUT=... -P embed_assets.cmake
set(_delim "ratchet_asset")
set(_files "index.html|/|text/html\\; charset=utf-8"
           "app.css|/app.css|text/css\\; charset=utf-8"
           "app.js|/app.js|text/javascript\\; charset=utf-8")
set(_body "// Generated from tools/ratchet/web/assets by embed_assets.cmake; do not edit.\n")
string(APPEND _body "#include \"web/assets.hpp\"\n\nnamespace ratchet::cli::web {\n\n")
string(APPEND _body "std::optional<Asset> find_asset(std::string_view path) {\n")
foreach(_entry IN LISTS _files)
  string(REPLACE "|" ";" _parts "${_entry}")
  list(GET _parts 0 _name)
  list(GET _parts 1 _path)
  list(GET _parts 2 _type)
  file(READ "${ASSETS_DIR}/${_name}" _text)
  string(FIND "${_text}" ")${_delim}\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${ASSETS_DIR}/${_name} holds the raw string delimiter )${_delim}\"")
  endif()
  string(APPEND _body "  if (path == \"${_path}\")\n")
  string(APPEND _body "    return Asset{\"${_type}\", R\"${_delim}(${_text})${_delim}\"};\n")
endforeach()
string(APPEND _body "  return std::nullopt;\n}\n\n}  // namespace ratchet::cli::web\n")
# Rewritten only when it changes, so an unchanged asset rebuilds nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" _old)
endif()
if(NOT _old STREQUAL _body)
  file(WRITE "${OUTPUT}" "${_body}")
endif()
