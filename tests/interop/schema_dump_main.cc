// hpu_schema_dump: prints hpu-train's config surface (schema_dump.h) as JSON.
#include <iostream>

#include "schema_dump.h"

int main() {
  std::cout << hpu::core::config::schemaDump().dump(1) << "\n";
  return 0;
}
