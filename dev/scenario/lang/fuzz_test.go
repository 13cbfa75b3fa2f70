package lang

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: the scenario format never panics on any input; the shipped
// scenarios are the seed corpus.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "scenarios", "*.yaml"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("name: x\ncluster: {}\nsteps: [{at: 1h, tick: {}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse(data)
	})
}
