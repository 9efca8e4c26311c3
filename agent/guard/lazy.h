/*
 * lazy: the libraries libsmguard.so loads only when it needs them, with
 * dlopen(RTLD_LOCAL) rather than as dependencies: libcurl (and the TLS,
 * Kerberos and LDAP libraries behind it), zstd, json-c, libdw and libelf.
 *
 * A process that only loads the agent (an inert agent, a helper that
 * SM_GUARD_ONLY leaves alone, a guarded program before its first violation)
 * pays for none of them at exec, and their symbols never join the program's
 * global scope, where they could take the place of the program's own copies.
 * The agent's code calls the libraries' functions by their usual names: this
 * module defines each of them (hidden, never exported) to load its library on
 * first use and forward the call. When a library cannot be loaded, its
 * functions fail the way the library reports failure (NULL, an error code),
 * and lazy_error() says why.
 *
 * The libraries are loaded on the agent's own threads (shipping, naming
 * frames), where the descriptor dlopen() opens is not in the program's table;
 * json-c also by the constructor, before main(), to read the profile.
 */
#ifndef SM_GUARD_LAZY_H
#define SM_GUARD_LAZY_H

enum lazy_lib { LAZY_CURL, LAZY_ZSTD, LAZY_JSONC, LAZY_ELF, LAZY_DW, LAZY_NLIBS };

/* Loads lib now (once; later calls repeat the first outcome). Returns 0 or -1 (lazy_error() says why). */
int lazy_load(enum lazy_lib lib);
/* Why lib could not be loaded, or "" when it was (or was not tried yet). */
const char *lazy_error(enum lazy_lib lib);
/* 1 when lib has been loaded (by the thread asking, or before it synchronised with the loader). */
int lazy_loaded(enum lazy_lib lib);
/* 1 when the OpenSSL behind the loaded libcurl has been cleaned up: by the exit handler of a
 * program that initialised OpenSSL before the agent did (lazy.c). libcurl must not be used then,
 * not even to close a connection. 0 otherwise, and when libcurl was never loaded. */
int lazy_tls_stopped(void);
/* 1 when a libcrypto is in the process. Asked before libcurl is loaded, it says whether the program
 * may have initialised the OpenSSL libcurl will use (a soname is loaded once) before the agent,
 * with OpenSSL's exit handler, which frees it while the program exits. */
int lazy_crypto_loaded(void);

#endif
