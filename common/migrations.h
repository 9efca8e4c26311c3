/*
 * migrations: the schema migrations of sql/, embedded at build time by
 * deploy/embed-sql.sh, in version order; and the functions of sql/functions/,
 * each defined there only and applied after the migrations (CREATE OR REPLACE).
 */
#ifndef SM_MIGRATIONS_H
#define SM_MIGRATIONS_H

struct migration {
	int version;
	const char *name;
	const char *sql;
};

struct sql_function {
	const char *name;
	const char *sql;
};

extern const struct migration sm_migrations[];
extern const int sm_nmigrations;
extern const struct sql_function sm_functions[];
extern const int sm_nfunctions;

#endif
