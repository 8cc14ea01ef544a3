/* Wine 8.0 lacks bcryptprimitives.dll (Windows 8+ has it): ProcessPrng, which Rust's std calls
 * for random bytes, over advapi32's RtlGenRandom. For wine-check.sh's Wine prefix only; the
 * etcdlock DLL uses the real one on Windows. */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
