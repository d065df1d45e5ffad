package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

const completionUsage = `Usage: poolrun completion bash|zsh|fish

Prints a script that completes poolrun's commands, their flags, file
names, and in poolrun run the ids of the jobs of the workflow file (from
poolrun run --list-ids FILE), for the shell named.
`

const completionDetails = `The script for zsh loads the one for bash through zsh's bashcompinit.

Example:
  source <(poolrun completion bash)          # in ~/.bashrc
  source <(poolrun completion zsh)           # in ~/.zshrc, after compinit
  poolrun completion fish > ~/.config/fish/completions/poolrun.fish
`

// completedCommands are the commands that the scripts complete, in the
// order of poolrun's usage.
var completedCommands = []string{"run", "scaffold", "inspect", "bench", "report", "worker", "version", "help", "completion"}

func runCompletion(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("completion", completionUsage, completionDetails)
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, "want one shell: bash, zsh or fish")
	}
	cmds, err := commandFlags(ctx)
	if err != nil {
		return err
	}
	var script string
	switch fs.Arg(0) {
	case "bash":
		script = bashCompletion(cmds)
	case "zsh":
		script = "# poolrun completion for zsh: the script for bash, through bashcompinit.\n" +
			"# Load it with: source <(poolrun completion zsh), after compinit.\n" +
			"autoload -U +X bashcompinit && bashcompinit\n" + bashCompletion(cmds)
	case "fish":
		script = fishCompletion(cmds)
	default:
		return usageError(fs, fmt.Sprintf("unknown shell %q: want bash, zsh or fish", fs.Arg(0)))
	}
	_, err = io.WriteString(stdout, script)
	return err
}

// A cmdFlag is a flag of a command, as its help lists it.
type cmdFlag struct {
	short, long string // "j", "jobs"; short is "" for none
	// value is what the flag takes as its value, the next word: 'f' a
	// file, 'd' a folder, 'v' another value; 0 for none (a flag that
	// takes an optional value, --force[=JOB-GLOB], takes none from the
	// next word).
	value byte
}

// names returns f's names as they are typed: -j --jobs.
func (f cmdFlag) names() []string {
	if f.short == "" {
		return []string{"--" + f.long}
	}
	return []string{"-" + f.short, "--" + f.long}
}

// helpFlag matches the line of a flag in a command's help (flagUsages):
// its short name if any, its long name, and the name of its value.
var helpFlag = regexp.MustCompile(`(?m)^  (?:-(.), |    )--([a-z0-9-]+)(\[=[^\]]*\]| \S+)?$`)

// commandFlags returns the flags of each command that has any, read from
// its help, which lists them all: the scripts complete what the commands
// take, whatever flags they gain.
func commandFlags(ctx context.Context) (map[string][]cmdFlag, error) {
	cmds := make(map[string][]cmdFlag)
	for _, cmd := range completedCommands {
		switch cmd {
		case "version", "help":
			continue // no flags of their own
		}
		var help strings.Builder
		if err := Main(ctx, []string{cmd, "--help"}, &help, io.Discard); err != nil {
			return nil, err
		}
		flags, _, _ := strings.Cut(help.String()[strings.Index(help.String(), "\nFlags:\n")+1:], "\n\n")
		for _, m := range helpFlag.FindAllStringSubmatch(flags, -1) {
			f := cmdFlag{short: m[1], long: m[2]}
			switch v := strings.TrimSpace(m[3]); {
			case v == "" || strings.HasPrefix(v, "[="):
			case v == "DIR":
				f.value = 'd'
			case v == "FILE" || strings.HasSuffix(v, ".html"):
				f.value = 'f'
			default:
				f.value = 'v'
			}
			cmds[cmd] = append(cmds[cmd], f)
		}
	}
	return cmds, nil
}

// bashCompletion is the script for bash of the commands' flags cmds. It
// completes a command's name, or a flag's with a dash; a flag's value
// with a file or folder name where it is one; and for poolrun run, its
// workflow file and then the ids of the file's jobs, or with no file
// given those of poolrun.yaml, as poolrun run takes them.
func bashCompletion(cmds map[string][]cmdFlag) string {
	var flags, values strings.Builder
	for _, cmd := range completedCommands {
		if len(cmds[cmd]) == 0 {
			continue
		}
		var names []string
		kinds := map[byte][]string{}
		for _, f := range cmds[cmd] {
			names = append(names, f.names()...)
			if f.value != 0 {
				for _, n := range f.names() {
					kinds[f.value] = append(kinds[f.value], cmd+":"+n)
				}
			}
		}
		fmt.Fprintf(&flags, "\t%s) echo '%s' ;;\n", cmd, strings.Join(names, " "))
		for _, k := range []byte("dfv") {
			if len(kinds[k]) > 0 {
				fmt.Fprintf(&values, "\t%s) echo %c ;;\n", strings.Join(kinds[k], "|"), k)
			}
		}
	}
	return fmt.Sprintf(bashScript, strings.Join(completedCommands, " "), flags.String(), values.String())
}

// bashScript is the script of bashCompletion: the commands, then the
// cases of _poolrun_flags and of _poolrun_value. It reads COMP_WORDS
// only by slices (${COMP_WORDS[@]:$i:1}), which count from 0 in zsh too;
// their offsets start with $, as zsh takes a letter there for a modifier.
const bashScript = `# poolrun completion for bash. Load it with: source <(poolrun completion bash)
_poolrun_commands='%s'

# _poolrun_flags CMD prints the flags of poolrun CMD.
_poolrun_flags() {
	case $1 in
%s	esac
}

# _poolrun_value CMD FLAG prints what FLAG of poolrun CMD takes from the
# next word: d a folder, f a file, v another value; nothing if none.
_poolrun_value() {
	case $1:$2 in
%s	esac
}

_poolrun() {
	local cur=${COMP_WORDS[@]:$COMP_CWORD:1} prog=${COMP_WORDS[@]:0:1}
	local cmd=scaffold first=1 value= dir= file= w
	for w in "${COMP_WORDS[@]:1:$((COMP_CWORD - 1))}"; do
		if [[ -n $value ]]; then
			[[ $value == -C || $value == --directory ]] && dir=$w
			value=
			continue
		fi
		if ((first)); then
			first=0
			if [[ $w != -* ]]; then
				cmd=$w
				continue
			fi
		fi
		case $w in
		--directory=*) dir=${w#--directory=} ;;
		-C=*) dir=${w#-C=} ;;
		-C?*) dir=${w#-C} ;;
		--*=*) ;;
		-*) [[ -n $(_poolrun_value "$cmd" "$w") ]] && value=$w ;;
		*) [[ -z $file ]] && file=$w ;;
		esac
	done
	COMPREPLY=()
	if [[ -n $value ]]; then
		case $(_poolrun_value "$cmd" "$value") in
		d) COMPREPLY=($(compgen -d -- "$cur")) ;;
		f) COMPREPLY=($(compgen -f -- "$cur")) ;;
		esac
		return 0
	fi
	if ((first)) && [[ $cur != -* ]]; then
		COMPREPLY=($(compgen -W "$_poolrun_commands" -- "$cur"))
		return 0
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_poolrun_flags "$cmd")" -- "$cur"))
		return 0
	fi
	case $cmd in
	help) COMPREPLY=($(compgen -W "$_poolrun_commands" -- "$cur")) ;;
	completion) COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")) ;;
	version) ;;
	run)
		# The workflow file, then its targets; a first argument that is
		# no file is a target of poolrun.yaml, as poolrun run takes it.
		local ids
		if [[ -n $file ]] && (cd "${dir:-.}" 2>/dev/null && [[ -e $file || $file == *.yaml || $file == *.yml ]]); then
			ids=$("$prog" run -C "${dir:-.}" --list-ids "$file" 2>/dev/null)
		else
			[[ -z $file ]] && COMPREPLY=($(cd "${dir:-.}" 2>/dev/null && compgen -f -- "$cur"))
			ids=$("$prog" run -C "${dir:-.}" --list-ids 2>/dev/null)
		fi
		COMPREPLY+=($(compgen -W "$ids" -- "$cur"))
		;;
	*) COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
	return 0
}

complete -o filenames -F _poolrun poolrun
`

// fishCompletion is the script for fish of the commands' flags cmds, as
// bashCompletion's for bash.
func fishCompletion(cmds map[string][]cmdFlag) string {
	var b strings.Builder
	all := strings.Join(completedCommands, " ")
	b.WriteString("# poolrun completion for fish. Load it with:\n")
	b.WriteString("#   poolrun completion fish > ~/.config/fish/completions/poolrun.fish\n")
	b.WriteString("complete -c poolrun -f\n")
	fmt.Fprintf(&b, "complete -c poolrun -n __fish_use_subcommand -a '%s'\n", all)
	fmt.Fprintf(&b, "complete -c poolrun -n '__fish_seen_subcommand_from help' -a '%s'\n", all)
	b.WriteString("complete -c poolrun -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
	var runValues []string
	for _, cmd := range completedCommands {
		cond := "__fish_seen_subcommand_from " + cmd
		if cmd == "scaffold" {
			cond = "__fish_use_subcommand; or " + cond // poolrun -j 2: the scaffold
		}
		for _, f := range cmds[cmd] {
			fmt.Fprintf(&b, "complete -c poolrun -n '%s'", cond)
			if f.short != "" {
				fmt.Fprintf(&b, " -s %s", f.short)
			}
			fmt.Fprintf(&b, " -l %s", f.long)
			switch f.value {
			case 'd':
				b.WriteString(" -x -a '(__fish_complete_directories)'")
			case 'f':
				b.WriteString(" -r -F")
			case 'v':
				b.WriteString(" -x")
			}
			b.WriteString("\n")
			if cmd == "run" && f.value != 0 {
				runValues = append(runValues, f.names()...)
			}
		}
	}
	for _, cmd := range []string{"scaffold", "report", "inspect", "bench", "worker"} {
		fmt.Fprintf(&b, "complete -c poolrun -n '__fish_seen_subcommand_from %s' -F\n", cmd)
	}
	fmt.Fprintf(&b, fishRun, strings.Join(runValues, " "))
	return b.String()
}

// fishRun completes poolrun run's arguments: files, and the ids of the
// jobs of the workflow file, the first argument (poolrun.yaml's when it
// is no file). Its blank is the flags of run that take the next word.
const fishRun = `function __poolrun_run_ids
	set -l words (commandline -opc)
	set -l file
	set -l dir .
	set -l value
	for w in $words[3..-1]
		if test -n "$value"
			contains -- $value -C --directory; and set dir $w
			set value
			continue
		end
		switch $w
			case '--directory=*' '-C=*'
				set dir (string replace -r '^[^=]*=' '' -- $w)
			case '-C?*'
				set dir (string sub -s 3 -- $w)
			case '--*=*'
			case %s
				set value $w
			case '-*'
			case '*'
				set file $w
				break
		end
	end
	if test -n "$file"; and not test -e "$dir/$file"; and not string match -q -r '\.ya?ml$' -- $file
		set file
	end
	command poolrun run -C $dir --list-ids $file 2>/dev/null
end
complete -c poolrun -n '__fish_seen_subcommand_from run' -F -a '(__poolrun_run_ids)'
`
