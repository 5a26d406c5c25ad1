/* ostore: durable graphs of C objects, kept as Python pickles.
 * Include this one header; see docs/api.md. */
#ifndef OSTORE_H
#define OSTORE_H

#include "ostore/common.h"
#include "ostore/value.h"
#include "ostore/pickle.h"
#include "ostore/hooks.h"
#include "ostore/store.h"
#include "ostore/maps.h"
#include "ostore/raw.h"

#endif
