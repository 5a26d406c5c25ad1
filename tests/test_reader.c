#include <criterion/criterion.h>
#include "ostore.h"

Test(reader, links) { cr_assert_eq(ost_version(), OST_VERSION_HEX); }
