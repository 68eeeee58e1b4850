package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// citation matches "DESIGN §4", "DESIGN §5.3" and "DESIGN §4 rule 2".
var citation = regexp.MustCompile(`DESIGN §(\d+)(?:\.(\d+))?(?: rule (\d+))?`)

// design indexes DESIGN.md: its sections ("## 4. …"), subsections
// ("### 5.3 …") and the numbered rules of each section ("3. …").
type design struct {
	sections, subsections, rules map[string]bool
}

func readDesign(t *testing.T) design {
	t.Helper()
	b, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	d := design{sections: map[string]bool{}, subsections: map[string]bool{}, rules: map[string]bool{}}
	section := regexp.MustCompile(`^## (\d+)\. `)
	sub := regexp.MustCompile(`^### (\d+)\.(\d+) `)
	rule := regexp.MustCompile(`^(\d+)\. `)
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			cur = m[1]
			d.sections[cur] = true
		} else if m := sub.FindStringSubmatch(line); m != nil {
			d.subsections[m[1]+"."+m[2]] = true
		} else if m := rule.FindStringSubmatch(line); m != nil && cur != "" {
			d.rules[cur+" rule "+m[1]] = true
		}
	}
	return d
}

// Every citation of the design in the code names a section (subsection,
// rule) that DESIGN.md has.
func TestDesignCitations(t *testing.T) {
	d := readDesign(t)
	if len(d.sections) < 5 {
		t.Fatalf("DESIGN.md has %d numbered sections; is it the design document?", len(d.sections))
	}
	cited := 0
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if name := e.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".js") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range citation.FindAllStringSubmatch(line, -1) {
				if strings.Contains(path, "design_test.go") {
					continue
				}
				cited++
				where := path + ":" + strconv.Itoa(i+1)
				switch {
				case !d.sections[m[1]]:
					t.Errorf("%s cites %q: DESIGN.md has no section %s", where, m[0], m[1])
				case m[2] != "" && !d.subsections[m[1]+"."+m[2]]:
					t.Errorf("%s cites %q: DESIGN.md has no section %s.%s", where, m[0], m[1], m[2])
				case m[3] != "" && !d.rules[m[1]+" rule "+m[3]]:
					t.Errorf("%s cites %q: section %s of DESIGN.md has no rule %s", where, m[0], m[1], m[3])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Fatal("no citation of DESIGN.md found in the code: is the walk looking in the right place?")
	}
}
