/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "codes.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const struct {
        const char *name;
        int errnum;
} codes[_NSBOX_CODE_MAX] = {
        [NSBOX_CODE_OK] = { "ok", 0 },
#define NSBOX_CODE_ROW(e, n, errnum) [NSBOX_CODE_##e] = { n, errnum },
        NSBOX_CODES(NSBOX_CODE_ROW)
#undef NSBOX_CODE_ROW
};

const char *nsbox_code_name(nsbox_code code)
{
        return (unsigned)code < _NSBOX_CODE_MAX ? codes[code].name : codes[NSBOX_CODE_INTERNAL].name;
}

static nsbox_code code_by_name(const char *name)
{
        for (unsigned i = NSBOX_CODE_OK + 1; name && i < _NSBOX_CODE_MAX; i++)
                if (!strcmp(codes[i].name, name))
                        return (nsbox_code)i;
        return NSBOX_CODE_INTERNAL;
}

const char *nsbox_code_static(const char *name) { return codes[code_by_name(name)].name; }

int nsbox_code_errno(const char *name) { return codes[code_by_name(name)].errnum; }

const char *nsbox_code_for_errno(int r)
{
        switch (r < 0 ? -r : r) {
        case ENOENT: return "not_found";
        case EEXIST:
        case EBUSY: return "conflict";
        case EINVAL:
        case EPERM:
        case EOPNOTSUPP: return "invalid_argument";
        case ETIMEDOUT: return "timeout";
        case EFBIG: return "too_large";
        case EMFILE:
        case ENFILE:
        case EAGAIN: return "capacity"; /* out of file descriptors, or of host id ranges */
        default: return "internal";
        }
}
