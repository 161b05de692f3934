# nsbox: native Linux sandboxes for AI agents.
#
#   make                      build build/nsbox, build/nsboxd, build/libnsbox.so and the C example
#   make V=1                  the same, printing each full command instead of "  CC  runtime/agent.o"
#   make check                build and run every test tier (ends with "N passed, N failed, N skipped")
#   make bench                benchmarks against peers (not part of check)
#   make install PREFIX=/usr DESTDIR=/tmp/pkg
#   make SANITIZE=address,undefined check     (B=build-asan: in a tree of its own, as CI does)
#   make check-build          what check runs, built only
#   make fuzz                 libFuzzer harnesses (tests/fuzz), FUZZ_SECONDS (60) each; needs clang
#   make valgrind             the unit tier under valgrind (part of check, except with SANITIZE)

VERSION := 0.1.0
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
# systemd units (lib/systemd under the prefix; Debian's own packages use /usr/lib/systemd)
UNITDIR ?= $(PREFIX)/lib/systemd/system
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
POLICYDIR ?= $(DATADIR)/nsbox/policy
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
# nsbox-agent, the program every nsboxd and libnsbox sandbox's agent is an exec of
AGENTDIR := $(LIBEXECDIR)/nsbox
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
B := build

CC ?= cc
PKG_CONFIG ?= pkg-config
# Every dependency comes through pkg-config; the nsbox binary links only what it uses, so a cold
# start does not pay for libgit2's relocations.
ALL_PKGS := libseccomp libcap libnl-3.0 libnl-route-3.0 jansson libgit2 libmicrohttpd libcurl hiredis libarchive
RUN_PKGS := libseccomp libcap jansson libnl-route-3.0 libnl-3.0
ifeq ($(filter clean,$(MAKECMDGOALS)),)
MISSING := $(shell for p in $(ALL_PKGS) check; do $(PKG_CONFIG) --exists $$p || echo $$p; done)
ifneq ($(strip $(MISSING)),)
$(error missing development packages: $(MISSING); run ./quickstart.sh or see README, Quick start)
endif
endif
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(RUN_PKGS))
# Linked statically when the archives exist (Debian's -dev packages ship them): no run-time
# symbol resolution for them on every sandbox start.  STATIC_DEPS=0 links them dynamically.
STATIC_DEPS ?= 1
ifeq ($(STATIC_DEPS),1)
PKG_LIBS := -Wl,-Bstatic $(shell $(PKG_CONFIG) --libs $(RUN_PKGS)) -Wl,-Bdynamic
else
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(RUN_PKGS))
endif
# libgit2 (and what it pulls in) only in the programs that serve git tools: nsboxd and the tests.
GIT_CFLAGS := $(shell $(PKG_CONFIG) --cflags libgit2)
GIT_LIBS := $(shell $(PKG_CONFIG) --libs libgit2)
# nsbox-agent's git tools are local (no fetch, push or clone): with STATIC_DEPS=1 its libgit2 is
# static, without libssh2 and GSSAPI, whose entry points fail (runtime/agent_notransport.c), so
# no sandbox's agent loads libcrypto and keeps a private copy of its relocated tables.
ifeq ($(STATIC_DEPS),1)
AGENT_GIT_OBJS := $(B)/runtime/agent_notransport.o
AGENT_GIT_LIBS := -Wl,-Bstatic $(filter-out -lssh2 -lrt,$(shell $(PKG_CONFIG) --static --libs libgit2)) -Wl,-Bdynamic
else
AGENT_GIT_OBJS :=
AGENT_GIT_LIBS := $(GIT_LIBS)
endif
# libmicrohttpd: nsboxd's HTTP API (runtime/daemon/http*.c), in the programs that link nsboxd's rooms
# (and zlib: a gzip upload to /files is inflated as it comes)
MHD_CFLAGS := $(shell $(PKG_CONFIG) --cflags libmicrohttpd)
MHD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd zlib)
# libcurl: the HTTP API's port proxy (runtime/daemon/http_proxy.c), in the same programs
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl)
CURL_LIBS := $(shell $(PKG_CONFIG) --libs libcurl)
# hiredis: the cluster catalog in Redis (runtime/daemon/catalog.c), in the same programs; its
# headers as <hiredis/...>, without its -I (its net.h, sds.h... would shadow others)
HIREDIS_LIBS := $(shell $(PKG_CONFIG) --libs hiredis)
# libarchive: nsbox image import (runtime/image_*.c), its headers only: the nsbox command
# dlopens it when it imports an image, so no other start pays for loading it; not in libnsbox.
ARCHIVE_CFLAGS := $(shell $(PKG_CONFIG) --cflags libarchive)
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

# Quiet builds (kbuild, crun): one line per step ("  CC      runtime/agent.o"); `make V=1` shows
# the full commands, `make -s` neither.  Errors and warnings are printed as they come either way.
V ?= 0
ifeq ($(V),1)
Q :=
say :=
else
Q := @
ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
say :=
else
say = @printf '  %-7s %s\n' '$(1)' '$(2)'
endif
endif

WARNINGS := -Wall -Wextra -Werror -Wformat=2 -Wstrict-prototypes -Wshadow=local \
	-Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
	-Werror=int-conversion -Werror=return-type -Werror=missing-include-dirs \
	-Werror=pointer-arith -Werror=init-self -Werror=vla
SANITIZE ?=
ifeq ($(strip $(SANITIZE)),)
HARDEN := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection -fcf-protection
else
HARDEN := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_LDFLAGS := -fsanitize=$(SANITIZE)
endif
CFLAGS ?= -O2 -g
override CFLAGS += -std=gnu11 -D_GNU_SOURCE -fPIE $(WARNINGS) $(HARDEN) -MMD -MP \
	-DNSBOX_VERSION='"$(VERSION)"' -DNSBOX_POLICYDIR='"$(POLICYDIR)"' -DNSBOX_BINDIR='"$(BINDIR)"' -DNSBOX_DATADIR='"$(DATADIR)"' \
	-DNSBOX_AGENTDIR='"$(AGENTDIR)"' $(PKG_CFLAGS) $(GIT_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS) $(ARCHIVE_CFLAGS)
override LDFLAGS += -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(SAN_LDFLAGS)

CLI_SRCS := runtime/cli.c runtime/cli_complete.c runtime/cli_session.c runtime/cli_cp.c runtime/cli_cp_fd.c runtime/cli_exec.c runtime/cli_daemon.c runtime/cli_progress.c runtime/cli_snapshot.c runtime/cli_service.c runtime/cli_mcp.c runtime/cli_procs.c runtime/cli_image.c runtime/image_import.c runtime/image_extract.c
# nsboxd's own files are in runtime/daemon/ (daemon.h is its public header).
DAEMON_SRCS := $(wildcard runtime/daemon/*.c)
LIB_SRCS := $(filter-out $(CLI_SRCS) runtime/nsboxd.c runtime/agent_main.c runtime/agent_notransport.c,$(wildcard runtime/*.c)) $(DAEMON_SRCS) rootfs/hostview.c $(wildcard tools/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_OBJS := $(UNIT_SRCS:tests/unit/%.c=$(B)/unit-obj/%.o)
# The fuzz harnesses are also built into the unit tier, which replays their corpus and the
# inputs that once crashed them (tests/unit/fuzz_test.c).
FUZZ_SRCS := $(wildcard tests/fuzz/*.c)
FUZZ_NAMES := $(FUZZ_SRCS:tests/fuzz/%.c=%)
UNIT_OBJS += $(FUZZ_SRCS:tests/fuzz/%.c=$(B)/fuzz-replay/%.o)
PROBE_SRCS := $(wildcard tests/escape/*.c)
PROBES := $(PROBE_SRCS:tests/escape/%.c=$(B)/tests/%)

.PHONY: all check check-build unit integration escape vm bench install uninstall clean fuzz fuzz-binaries valgrind
all: $(B)/nsbox $(B)/nsboxd $(B)/nsbox-agent $(B)/code-interpreter $(B)/libnsbox.so $(B)/examples/nsbox-example

# Objects depend on the flags they were built with: `make install PREFIX=/usr` after a plain
# `make` recompiles with the right policy directory instead of installing a stale binary.
$(B)/.flags: FORCE
	@mkdir -p $(B)
	@echo '$(CFLAGS) $(LDFLAGS) $(PKG_LIBS)' | cmp -s - $@ || echo '$(CFLAGS) $(LDFLAGS) $(PKG_LIBS)' > $@
.PHONY: FORCE

$(B)/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CC,$(@:$(B)/%=%))
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

# The default policy is built into the programs (.incbin in runtime/policy_default.c), which the
# compiler's dependency files do not see.
$(B)/runtime/policy_default.o $(B)/pic/runtime/policy_default.o: policy/default.json
# So is the code interpreter's server (.incbin in runtime/interp_source.c).
$(B)/runtime/interp_source.o $(B)/pic/runtime/interp_source.o: rootfs/code-interpreter/server.py

# made anew: `ar r` keeps the members of sources since removed (runtime/daemon.o once), which
# would still be linked in place of their successors
$(B)/libnsbox.a: $(LIB_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

# libnsbox.so: the public API (include/nsbox.h) over the nsboxd client and, for its in-process
# mode, the whole runtime (launcher, agent, tools; nsboxd's own files aside), compiled -fPIC
# with hidden visibility; the version script exports the nsbox_* functions of nsbox.h and
# nothing else.  Its dependencies are the library's own (DT_NEEDED), not its users': they link
# with -lnsbox alone (nsbox.pc lists them as Requires.private, for static links).  They are
# linked dynamically even with STATIC_DEPS=1: Debian's static archives are not
# position-independent.  build/libnsbox.a (-fPIE, static deps) stays what nsbox and nsboxd link.
SO_VERSION := 0
SO_SRCS := $(filter-out $(DAEMON_SRCS) runtime/dconfig.c runtime/dlog.c runtime/keeper.c runtime/systemd.c,$(LIB_SRCS))
SO_OBJS := $(SO_SRCS:%.c=$(B)/pic/%.o)
SO_LIBS := $(shell $(PKG_CONFIG) --libs $(ALL_PKGS))
# libnl's under Libs.private: as a Requires.private its -I/usr/include/libnl3 would reach every
# user's --cflags, and nsbox.h includes no header of any dependency.
SO_REQUIRES := Requires.private: libseccomp libcap jansson libgit2\nLibs.private: $(shell $(PKG_CONFIG) --libs libnl-route-3.0 libnl-3.0)
# a sanitizer build leaves the sanitizer's symbols to the program's runtime
SO_LDFLAGS := -shared -Wl,-soname,libnsbox.so.$(SO_VERSION) -Wl,--version-script=runtime/libnsbox.sym \
	$(filter-out -pie,$(LDFLAGS)) $(if $(strip $(SANITIZE)),,-Wl,--no-undefined)
$(B)/pic/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CC,$(@:$(B)/%=%))
	$(Q)$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<
$(B)/libnsbox.so.$(VERSION): $(SO_OBJS) runtime/libnsbox.sym
	$(call say,LD,$@)
	$(Q)$(CC) $(SO_LDFLAGS) -o $@ $(SO_OBJS) $(SO_LIBS)
$(B)/libnsbox.so.$(SO_VERSION) $(B)/libnsbox.so: $(B)/libnsbox.so.$(VERSION)
	$(call say,LN,$@)
	$(Q)ln -sf libnsbox.so.$(VERSION) $@
$(B)/nsbox.pc: contrib/pkgconfig/nsbox.pc.in $(B)/.flags
	$(call say,GEN,$@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		-e 's|@REQUIRES_PRIVATE@|$(SO_REQUIRES)|' $< > $@
# The example, against the in-tree header and library (it runs from the build tree: rpath).
$(B)/examples/nsbox-example: examples/nsbox-example.c include/nsbox.h $(B)/libnsbox.so $(B)/libnsbox.so.$(SO_VERSION)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) -Iinclude $(LDFLAGS) -o $@ $< -L$(B) -lnsbox -Wl,-rpath,'$$ORIGIN/..'

$(B)/nsbox: $(CLI_SRCS:%.c=$(B)/%.o) $(B)/libnsbox.a
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/nsboxd: $(B)/runtime/nsboxd.o $(B)/libnsbox.a
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS)

# It serves the git tools too: libgit2.
# the code interpreter's server as a file, for running it by hand (nsboxd and the agent have it
# built in: runtime/interp_source.c)
$(B)/code-interpreter: rootfs/code-interpreter/server.py
	$(call say,CP,$@)
	$(Q)install -m 0755 $< $@

$(B)/nsbox-agent: $(B)/runtime/agent_main.o $(AGENT_GIT_OBJS) $(B)/libnsbox.a
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(AGENT_GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS)

$(B)/tests/unit: $(UNIT_OBJS) $(B)/libnsbox.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS) $(CHECK_LIBS)
$(B)/unit-obj/%.o: tests/unit/%.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CC,$(@:$(B)/%=%))
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<
$(B)/fuzz-replay/%.o: tests/fuzz/%.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CC,$(@:$(B)/%=%))
	$(Q)$(CC) $(CFLAGS) -DNSBOX_FUZZ_REPLAY -c -o $@ $<

# Fuzzing: the library and each harness built by clang with libFuzzer, ASan and UBSan into
# build-fuzz/ (tests/fuzz/run says what is missing, runs each target FUZZ_SECONDS and fails on a
# crash).  clang does not know every gcc warning of WARNINGS, and -Wformat=2 in clang also
# flags vasprintf(fmt) in a printf-like function (runtime/error.c), libseccomp's SCMP_A0() and
# unused static inline helpers; gcc's -Werror build (make) stays the one that keeps them clean.
FUZZ_SECONDS ?= 60
FUZZ_B := build-fuzz
fuzz:
	@tests/fuzz/run --check-tools
	$(call say,MAKE,$(FUZZ_B))
	$(Q)$(MAKE) B=$(FUZZ_B) CC=clang SANITIZE=fuzzer-no-link,address,undefined \
		WARNINGS='$(WARNINGS) -Wno-unknown-warning-option -Wno-format-nonliteral -Wno-missing-field-initializers -Wno-unused-function' fuzz-binaries
	$(call say,FUZZ,$(FUZZ_NAMES))
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run $(abspath $(FUZZ_B))/fuzz $(FUZZ_NAMES)
fuzz-binaries: $(FUZZ_NAMES:%=$(B)/fuzz/%)
$(B)/fuzz/%: tests/fuzz/%.c $(B)/libnsbox.a $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(B)/libnsbox.a $(PKG_LIBS) $(GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS)

# The unit tier in one process under valgrind (CK_FORK=no: one leak check for the whole run, not
# one per forked test).  Also a tier of check, left out of a SANITIZE build (valgrind cannot run
# an ASan binary).
valgrind: $(B)/tests/unit
	@command -v valgrind >/dev/null || { echo "make valgrind: valgrind is missing (apt-get install valgrind)"; exit 1; }
	$(call say,TEST,valgrind)
	$(Q)NSBOX_SRC=$(CURDIR) NSBOX_BUILD=$(abspath $(B)) TIERS=valgrind tests/run

# Escape probes run inside sandboxes: plain C programs issuing the attacks directly.
# They are never sanitizer builds: a sanitizer runtime inside the sandbox would add its own
# system calls to the attacks.
PROBE_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS))
PROBE_LDFLAGS := $(filter-out -fsanitize=%,$(LDFLAGS))
$(B)/tests/%: tests/escape/%.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PROBE_CFLAGS) $(PROBE_LDFLAGS) -o $@ $<

# check-build: what check runs, built and not run (CI builds the sanitizer tree meanwhile)
check-build: all $(B)/tests/unit $(PROBES)
check: check-build
	$(call say,TEST,tests/run)
	$(Q)NSBOX=$(abspath $(B)/nsbox) NSBOX_BUILD=$(abspath $(B)) $(if $(SANITIZE),TIERS="$${TIERS:-unit integration escape vm}") tests/run

$(B)/tests/bench-session: tests/bench/session.c $(B)/libnsbox.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS)

$(B)/tests/bench-daemon: tests/bench/daemon.c tests/bench/floor.c $(B)/libnsbox.a
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -pthread -o $@ $^ $(PKG_LIBS) $(GIT_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS)

bench: $(B)/nsbox $(B)/nsboxd $(B)/nsbox-agent $(B)/tests/bench-session $(B)/tests/bench-daemon
	$(call say,BENCH,tests/bench/run)
	$(Q)NSBOX=$(abspath $(B)/nsbox) NSBOXD=$(abspath $(B)/nsboxd) NSBOX_BUILD=$(abspath $(B)) tests/bench/run

install: $(B)/nsbox $(B)/nsboxd $(B)/nsbox-agent $(B)/code-interpreter $(B)/libnsbox.so.$(VERSION) $(B)/nsbox.pc
	$(call say,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(POLICYDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DATADIR)/nsbox/rootfs
	$(Q)install -m 0755 $(B)/nsbox $(DESTDIR)$(BINDIR)/nsbox
	$(Q)install -m 0755 $(B)/nsboxd $(DESTDIR)$(BINDIR)/nsboxd
	$(Q)install -m 0755 $(B)/nsbox-agent $(DESTDIR)$(AGENTDIR)/nsbox-agent
	$(Q)install -m 0755 $(B)/code-interpreter $(DESTDIR)$(AGENTDIR)/code-interpreter
	$(Q)install -m 0644 policy/*.json $(DESTDIR)$(POLICYDIR)/
	$(Q)install -m 0644 man/nsbox.1 $(DESTDIR)$(MANDIR)/man1/nsbox.1
	$(Q)install -m 0644 man/nsbox-policy.5 $(DESTDIR)$(MANDIR)/man5/nsbox-policy.5
	$(Q)install -m 0644 man/nsbox-protocol.7 $(DESTDIR)$(MANDIR)/man7/nsbox-protocol.7
	$(Q)install -m 0644 man/nsboxd.8 $(DESTDIR)$(MANDIR)/man8/nsboxd.8
	$(Q)install -m 0755 rootfs/mkrootfs-debootstrap $(DESTDIR)$(DATADIR)/nsbox/rootfs/
	$(Q)install -d $(DESTDIR)$(DATADIR)/nsbox/apparmor
	$(Q)sed 's|@BINDIR@|$(BINDIR)|g' contrib/apparmor/nsbox.in > $(DESTDIR)$(DATADIR)/nsbox/apparmor/nsbox
	$(Q)chmod 0644 $(DESTDIR)$(DATADIR)/nsbox/apparmor/nsbox
	$(Q)install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(USERUNITDIR)
	$(Q)sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/nsboxd.service.in > $(DESTDIR)$(UNITDIR)/nsboxd.service
	$(Q)install -m 0644 contrib/systemd/nsboxd.socket $(DESTDIR)$(UNITDIR)/nsboxd.socket
	$(Q)sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/user/nsboxd.service.in > $(DESTDIR)$(USERUNITDIR)/nsboxd.service
	$(Q)install -m 0644 contrib/systemd/user/nsboxd.socket $(DESTDIR)$(USERUNITDIR)/nsboxd.socket
	$(Q)chmod 0644 $(DESTDIR)$(UNITDIR)/nsboxd.service $(DESTDIR)$(USERUNITDIR)/nsboxd.service
	$(Q)install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3
	$(Q)install -m 0755 $(B)/libnsbox.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnsbox.so.$(VERSION)
	$(Q)ln -sf libnsbox.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnsbox.so.$(SO_VERSION)
	$(Q)ln -sf libnsbox.so.$(SO_VERSION) $(DESTDIR)$(LIBDIR)/libnsbox.so
	$(Q)install -m 0644 include/nsbox.h $(DESTDIR)$(INCLUDEDIR)/nsbox.h
	$(Q)install -m 0644 $(B)/nsbox.pc $(DESTDIR)$(PKGCONFIGDIR)/nsbox.pc
	$(Q)install -m 0644 man/libnsbox.3 $(DESTDIR)$(MANDIR)/man3/libnsbox.3

uninstall:
	$(call say,RM,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(BINDIR)/nsbox $(DESTDIR)$(BINDIR)/nsboxd $(DESTDIR)$(MANDIR)/man1/nsbox.1 $(DESTDIR)$(MANDIR)/man5/nsbox-policy.5 \
		$(DESTDIR)$(MANDIR)/man7/nsbox-protocol.7 $(DESTDIR)$(MANDIR)/man8/nsboxd.8 \
		$(DESTDIR)$(UNITDIR)/nsboxd.service $(DESTDIR)$(UNITDIR)/nsboxd.socket \
		$(DESTDIR)$(USERUNITDIR)/nsboxd.service $(DESTDIR)$(USERUNITDIR)/nsboxd.socket
	$(Q)rm -f $(DESTDIR)$(LIBDIR)/libnsbox.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnsbox.so.$(SO_VERSION) $(DESTDIR)$(LIBDIR)/libnsbox.so \
		$(DESTDIR)$(INCLUDEDIR)/nsbox.h $(DESTDIR)$(PKGCONFIGDIR)/nsbox.pc $(DESTDIR)$(MANDIR)/man3/libnsbox.3
	$(Q)rm -rf $(DESTDIR)$(DATADIR)/nsbox $(DESTDIR)$(AGENTDIR)

clean:
	$(call say,CLEAN,$(B) $(FUZZ_B))
	$(Q)rm -rf $(B) $(FUZZ_B)

-include $(B)/runtime/agent_main.d $(B)/runtime/agent_notransport.d $(B)/runtime/nsboxd.d $(LIB_OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(FUZZ_NAMES:%=$(B)/fuzz/%.d) $(CLI_SRCS:%.c=$(B)/%.d) $(SO_OBJS:.o=.d)
