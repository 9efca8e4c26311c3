/*
 * migrations: the schema migrations of sql/, embedded at build time by
 * deploy/embed-sql.sh, in version order.
 */
#ifndef SM_MIGRATIONS_H
#define SM_MIGRATIONS_H

struct migration {
	int version;
	const char *name;
	const char *sql;
};

extern const struct migration sm_migrations[];
extern const int sm_nmigrations;

#endif
