/* symbols: the debug files' API (see symbols.h). */
#include "web/symbols.h"
#include "common/jsonw.h"
#include "common/symstore.h"
#include "web/api.h"
#include "web/request.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

void symbols_post_debuginfo(struct req *rq)
{
	struct debuginfo *d;
	char err[512];
	int n;
	struct jsonw w;

	if (!api_admin_only(rq, true, "debug files"))
		return;
	if (!(d = debuginfo_open())) {
		req_json_error(rq, 500, "out of memory");
		return;
	}
	if (debuginfo_load_mem(d, rq->body.data ? rq->body.data : "", rq->body.len) < 0)
		req_json_error(rq, 400, "the body is not a usable ELF debug file: %s", debuginfo_error(d));
	else if (!debuginfo_build_id(d)[0])
		req_json_error(rq, 400, "the file has no GNU build id (.note.gnu.build-id)");
	else if (debuginfo_count(d) == 0)
		req_json_error(rq, 400, "the file has no function symbols (.symtab or .dynsym)");
	else if ((n = symstore_put(rq->db, d, "upload", "POST /api/v1/debuginfo", err, sizeof(err))) < 0)
		req_json_error(rq, 500, "%s", err);
	else {
		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_kstr(&w, "build_id", debuginfo_build_id(d));
		jsonw_ki64(&w, "symbols", (int64_t)debuginfo_count(d));
		jsonw_ki64(&w, "frames_named", n);
		jsonw_end(&w);
		api_ok_json(rq, &w, 201);
	}
	debuginfo_free(d);
}

void symbols_get_debuginfo(struct req *rq)
{
	static const char *const names[] = { "missing", NULL };
	const char *missing = req_query(rq, "missing");
	struct symstore_build *b;
	char err[512];
	struct jsonw w;
	int n;

	if (!api_admin_only(rq, false, "debug files") || !api_known_query(rq, names, false))
		return;
	if (missing && strcmp(missing, "0") != 0 && strcmp(missing, "1") != 0) {
		req_json_error(rq, 400, "missing: 0 or 1");
		return;
	}
	if ((n = symstore_builds(rq->db, missing && missing[0] == '1', 1000, &b, err, sizeof(err))) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_karray(&w, "builds");
	for (int i = 0; i < n; i++) {
		jsonw_object(&w);
		jsonw_kstr(&w, "build_id", b[i].build_id);
		jsonw_kstr(&w, "module", b[i].module[0] ? b[i].module : NULL);
		jsonw_kstr(&w, "source", b[i].source[0] ? b[i].source : NULL);
		jsonw_kstr(&w, "path", b[i].path[0] ? b[i].path : NULL);
		jsonw_ki64(&w, "symbols", b[i].symbols);
		jsonw_ki64(&w, "unnamed_frames", b[i].unresolved);
		jsonw_kbool(&w, "missing", b[i].unresolved > 0 && !b[i].source[0]);
		jsonw_kstr(&w, "tried_at", b[i].tried_at[0] ? b[i].tried_at : NULL);
		jsonw_kstr(&w, "error", b[i].error[0] ? b[i].error : NULL);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	free(b);
	api_ok_json(rq, &w, 200);
}
