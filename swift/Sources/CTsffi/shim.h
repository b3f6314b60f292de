/* The module's one header. tsffi.h is found on the include path
 * pkg-config gives (Cflags: -I${includedir}), so this package holds no copy
 * of it and no absolute path: the header a host compiles against is the one
 * installed beside the library it links. */
#include <tsffi.h>
