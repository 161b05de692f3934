/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox completion bash|zsh|fish, and "did you mean" for options: both read the command table
 * (cli.c) and the options table (params.c), so neither can drift from what the commands take. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_session.h"
#include "params.h"
#include "util.h"

/* the table's flags that nsbox mcp takes only to refuse them (cli_mcp.c): not offered */
static bool mcp_refuses(const char *flag)
{
        static const char *const refused[] = { "count", "reuse", "json", "record" };
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
                if (!strcmp(flag, refused[i]))
                        return true;
        return false;
}

/* Every option of command c, space-separated: the table's flags it takes, its own, --help. */
static char *command_options(const nsbox_cli_command *c)
{
        strbuf sb;
        sb_init(&sb, 4096);
        for (size_t i = 0; c->params && i < nsbox_n_params; i++) {
                const nsbox_param *p = &nsbox_params[i];
                if (!p->flag || !(p->commands & c->params) || p->short_flag == 'h')
                        continue;
                if (c->params == NSBOX_CMD_MCP && mcp_refuses(p->flag))
                        continue;
                if (p->short_flag)
                        sb_appendf(&sb, "-%c ", p->short_flag);
                sb_appendf(&sb, "--%s ", p->flag);
        }
        sb_appendf(&sb, "%s%s-h --help", c->opts, c->opts[0] ? " " : "");
        return sb.buf; /* NULL when out of memory */
}

int nsbox_cli_unknown_option(const char *cmd, const char *arg)
{
        const nsbox_cli_command *c = nsbox_cli_command_find(cmd);
        _cleanup_free_ char *opts = c ? command_options(c) : NULL;
        const char *words[128];
        size_t n = 0;
        for (char *save = NULL, *w = opts ? strtok_r(opts, " ", &save) : NULL; w && n < 128; w = strtok_r(NULL, " ", &save))
                if (w[1] == '-') /* long options: a typo of "-f" is no better a guess than any */
                        words[n++] = w + 2;
        const char *near = arg[0] == '-' && arg[1] == '-' ? nsbox_closest_word(arg + 2, words, n) : NULL;
        _cleanup_free_ char *safe = nsbox_escape_controls(arg);
        if (!near)
                return nsbox_cli_usage_error(cmd, "unknown option '%s'", safe ? safe : "?");
        fprintf(stderr, "nsbox: %s: unknown option '%s' (did you mean --%s? see nsbox %s --help)\n", cmd, safe ? safe : "?", near, cmd);
        return EXIT_NSBOX;
}

static const char usage_completion[] =
        "usage: nsbox completion bash|zsh|fish\n"
        "\n"
        "Print a completion script for the shell, made from nsbox's own tables of commands and\n"
        "options.  bash: source <(nsbox completion bash); zsh: nsbox completion zsh > a file named\n"
        "_nsbox in $fpath; fish: nsbox completion fish > ~/.config/fish/completions/nsbox.fish.\n";

static void all_names(strbuf *sb)
{
        for (size_t i = 0; i < nsbox_cli_n_commands; i++)
                sb_appendf(sb, "%s%s", i ? " " : "", nsbox_cli_commands[i].name);
}

static int print_bash(void)
{
        strbuf names;
        sb_init(&names, 4096);
        all_names(&names);
        printf("# bash completion for nsbox (nsbox completion bash)\n"
               "_nsbox() {\n"
               "        local cur=\"${COMP_WORDS[COMP_CWORD]}\" opts=\"\" subs=\"\"\n"
               "        if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
               "                COMPREPLY=($(compgen -W \"%s --help --version\" -- \"$cur\"))\n"
               "                return\n"
               "        fi\n"
               "        case \"${COMP_WORDS[1]}\" in\n",
               names.buf ? names.buf : "");
        for (size_t i = 0; i < nsbox_cli_n_commands; i++) {
                const nsbox_cli_command *c = &nsbox_cli_commands[i];
                _cleanup_free_ char *opts = command_options(c);
                const char *subs = !strcmp(c->name, "help") ? names.buf : c->subs;
                printf("        %s) opts=\"%s\" subs=\"%s\" ;;\n", c->name, opts ? opts : "", subs ? subs : "");
        }
        printf("        esac\n"
               "        if [[ \"$cur\" == -* ]]; then\n"
               "                COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
               "        elif [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$subs\" ]; then\n"
               "                COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
               "        else\n"
               "                COMPREPLY=($(compgen -f -- \"$cur\"))\n"
               "        fi\n"
               "}\n"
               "complete -o filenames -F _nsbox nsbox\n");
        sb_release(&names);
        return 0;
}

static int print_zsh(void)
{
        strbuf names;
        sb_init(&names, 4096);
        all_names(&names);
        printf("#compdef nsbox\n"
               "# zsh completion for nsbox (nsbox completion zsh)\n"
               "_nsbox() {\n"
               "        local -a opts subs\n"
               "        if (( CURRENT == 2 )); then\n"
               "                compadd -- %s\n"
               "                return\n"
               "        fi\n"
               "        case ${words[2]} in\n",
               names.buf ? names.buf : "");
        for (size_t i = 0; i < nsbox_cli_n_commands; i++) {
                const nsbox_cli_command *c = &nsbox_cli_commands[i];
                _cleanup_free_ char *opts = command_options(c);
                const char *subs = !strcmp(c->name, "help") ? names.buf : c->subs;
                printf("        %s) opts=(%s); subs=(%s) ;;\n", c->name, opts ? opts : "", subs ? subs : "");
        }
        printf("        esac\n"
               "        if [[ $PREFIX == -* ]]; then\n"
               "                compadd -- $opts\n"
               "        elif (( CURRENT == 3 && ${#subs} )); then\n"
               "                compadd -- $subs\n"
               "        else\n"
               "                _files\n"
               "        fi\n"
               "}\n"
               "if [[ ${funcstack[1]} == _nsbox ]]; then _nsbox \"$@\"; else compdef _nsbox nsbox; fi\n");
        sb_release(&names);
        return 0;
}

static int print_fish(void)
{
        strbuf names;
        sb_init(&names, 4096);
        all_names(&names);
        printf("# fish completion for nsbox (nsbox completion fish)\n"
               "complete -c nsbox -n __fish_use_subcommand -f -a '%s'\n",
               names.buf ? names.buf : "");
        for (size_t i = 0; i < nsbox_cli_n_commands; i++) {
                const nsbox_cli_command *c = &nsbox_cli_commands[i];
                _cleanup_free_ char *opts = command_options(c);
                const char *subs = !strcmp(c->name, "help") ? names.buf : c->subs;
                if (subs)
                        printf("complete -c nsbox -n '__fish_seen_subcommand_from %s' -f -a '%s'\n", c->name, subs);
                for (char *save = NULL, *w = opts ? strtok_r(opts, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save))
                        printf("complete -c nsbox -n '__fish_seen_subcommand_from %s' -%s %s\n", c->name, w[1] == '-' ? "l" : "s",
                               w + (w[1] == '-' ? 2 : 1));
        }
        sb_release(&names);
        return 0;
}

int nsbox_cmd_completion(int argc, char **argv)
{
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                fputs(usage_completion, stdout);
                return 0;
        }
        if (argc != 2)
                return nsbox_cli_usage_error("completion", "expected bash, zsh or fish");
        if (!strcmp(argv[1], "bash"))
                return print_bash();
        if (!strcmp(argv[1], "zsh"))
                return print_zsh();
        if (!strcmp(argv[1], "fish"))
                return print_fish();
        return nsbox_cli_usage_error("completion", "'%s': expected bash, zsh or fish", argv[1]);
}
