package wsconn

import (
	"errors"
	"testing"
)

// The defaults are valid, and each setting the frame layer cannot work
// with is refused with ErrConfig.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"no read limit": func(c *Config) { c.ReadLimit = 0 },
		"no keep-alive": func(c *Config) { c.KeepAlive = 0 },
		"no give-up":    func(c *Config) { c.GiveUp = -1 },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
	}
}
