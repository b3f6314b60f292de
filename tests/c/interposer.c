/* Exports two of libtsffi's OWN names, as any library loaded before
 * it could (tests/test_coexistence.py, LD_PRELOAD). tsffi_last_error always
 * says "no error" and tsffi_abi_version a number the library never has: if
 * the library's internal calls went through its exported names, its refusals
 * would come back as "the call failed without a message" and it would look
 * for its Python package beside this file. */
#include <stddef.h>
#include <stdint.h>

size_t tsffi_last_error(char *buf, size_t cap) {
    if (buf != NULL && cap > 0)
        buf[0] = '\0';
    return 0;
}

uint32_t tsffi_abi_version(void) { return 999; }
