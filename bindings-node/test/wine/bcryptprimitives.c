/* Test harness only, never shipped: Wine 8.0 (Debian 12) has no
 * bcryptprimitives.dll, which every Windows since 8 carries and whose one
 * export, ProcessPrng, the Rust standard library (>= 1.78) imports for its
 * random numbers. This stand-in, placed beside node.exe under Wine, answers
 * ProcessPrng from BCryptGenRandom (Wine's bcrypt.dll).
 * Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -lbcrypt */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
