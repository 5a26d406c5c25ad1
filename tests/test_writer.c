#include <criterion/criterion.h>
#include "ostore.h"

Test(writer, links) { cr_assert_eq(ost_version(), OST_VERSION_HEX); }
