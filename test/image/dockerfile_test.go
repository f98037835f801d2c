package image

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode"
)

// stage is what a Dockerfile stage says about the image it builds.
type stage struct {
	from       string
	name       string // FROM ... AS <name>
	copies     []copyInstr
	args       []string
	labels     map[string]string
	user       string
	expose     []string
	entrypoint []string
	runs       []string
}

// copyInstr is a COPY instruction: COPY [--from=<from>] <source>... <dest>.
type copyInstr struct {
	from    string
	sources []string
	dest    string
}

// parseDockerfile reads the instructions the image depends on, stage by
// stage: enough of the Dockerfile syntax for ours (line continuations,
// comments, the JSON form of ENTRYPOINT, quoted LABEL values).
func parseDockerfile(path string) ([]stage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var raw []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			raw = append(raw, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	lines := joinContinued(raw)

	var stages []stage
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			words := strings.Fields(rest)
			st := stage{from: words[0], labels: map[string]string{}}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				st.name = words[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			return nil, fmt.Errorf("%s: %s before FROM", path, instr)
		}
		s := &stages[len(stages)-1]
		switch instr {
		case "COPY":
			var c copyInstr
			var plain []string
			for _, w := range shellWords(rest) {
				if v, ok := strings.CutPrefix(w, "--from="); ok {
					c.from = v
				} else if !strings.HasPrefix(w, "--") {
					plain = append(plain, w)
				}
			}
			if len(plain) < 2 {
				return nil, fmt.Errorf("%s: COPY %s: want a source and a destination", path, rest)
			}
			c.sources, c.dest = plain[:len(plain)-1], plain[len(plain)-1]
			s.copies = append(s.copies, c)
		case "ARG":
			name, _, _ := strings.Cut(rest, "=")
			s.args = append(s.args, name)
		case "LABEL":
			for _, w := range shellWords(rest) {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, fmt.Errorf("%s: LABEL %q is not key=value", path, w)
				}
				s.labels[k] = v
			}
		case "USER":
			s.user = rest
		case "EXPOSE":
			s.expose = strings.Fields(rest)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &s.entrypoint); err != nil {
				return nil, fmt.Errorf("%s: ENTRYPOINT is not in the JSON form: %w", path, err)
			}
		case "RUN":
			s.runs = append(s.runs, rest)
		}
	}
	return stages, nil
}

// shellWords splits s at spaces outside double quotes and drops the quotes,
// as a shell would for words without escapes or expansions.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case unicode.IsSpace(r) && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// goBuildCmd is a `go build <flags> -o <out> <package>` command.
type goBuildCmd struct {
	env, flags []string
	out, pkg   string
}

// goBuilds finds each `go build <flags> -o <out> <package>` in lines, one
// per line at most, and returns their parts.
func goBuilds(lines []string) []goBuildCmd {
	var builds []goBuildCmd
	for _, line := range lines {
		if b, ok := goBuild(line); ok {
			builds = append(builds, b)
		}
	}
	return builds
}

// goBuild finds `go build <flags> -o <out> <package>` in a command line
// and returns its parts.
func goBuild(cmd string) (b goBuildCmd, ok bool) {
	words := shellWords(cmd)
	for i := 0; i+1 < len(words); i++ {
		if (words[i] == "go" || words[i] == "$(GO)") && words[i+1] == "build" {
			b.env = words[:i]
			rest := words[i+2:]
			for j := 0; j < len(rest); j++ {
				if rest[j] == "-o" && j+1 < len(rest) {
					b.out = rest[j+1]
					j++
					continue
				}
				if j == len(rest)-1 && !strings.HasPrefix(rest[j], "-") {
					b.pkg = rest[j]
					continue
				}
				b.flags = append(b.flags, rest[j])
			}
			return b, true
		}
	}
	return goBuildCmd{}, false
}

// makeRecipe returns the command lines of a Makefile target.
func makeRecipe(path, target string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []string
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, target+":") {
			in = true
			continue
		}
		if in && !strings.HasPrefix(line, "\t") {
			break
		}
		if in {
			raw = append(raw, strings.TrimSpace(line))
		}
	}
	recipe := joinContinued(raw)
	if len(recipe) == 0 {
		return nil, fmt.Errorf("%s: no recipe for %s", path, target)
	}
	return recipe, nil
}

// joinContinued joins each line that ends in a backslash to the next, as
// Dockerfiles and Makefiles read them.
func joinContinued(raw []string) []string {
	var lines []string
	var cont strings.Builder
	for _, line := range raw {
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(s + " ")
			continue
		}
		cont.WriteString(line)
		lines = append(lines, cont.String())
		cont.Reset()
	}
	return lines
}
