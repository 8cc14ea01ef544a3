/* Test-only stand-in for Windows' bcryptprimitives.dll under Wine 8 (Debian 12),
 * which lacks it: Rust's standard library (1.78+) takes its random bytes from
 * ProcessPrng there, so no Rust-built Windows binary loads under Wine 8
 * without it. Windows 10 and later ship the real DLL; nothing we release
 * contains this file. scripts/wine/setup.sh builds it into the Wine prefix. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
