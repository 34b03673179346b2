// Command oracle runs the Machine Config Operator's Ignition spec 2 → 3.5 path on test
// inputs, to produce the expected outputs of this crate's tests. It is this crate's own
// program: it calls the MCO's vendored Ignition and ign-converter packages the way
// pkg/controller/common/helpers.go (IgnParseWrapper, ParseAndConvertConfig,
// removeIgnDuplicateFilesUnitsUsers, dedupePasswdUserSSHKeys, ValidateIgnition,
// validateIgn2FileModes) and ignition_converter.go (the 2.2 → 3.2 → … → 3.5 chain) do.
// See README.md for how to build it (GOPATH mode, Go 1.19+).
//
// Input (stdin): a JSON array of {"name": string, "input": config}.
// Output (stdout): a JSON array of {"name", "ok"?: <3.5 config as the MCO marshals it>,
// "error"?: string, "validate"?: string, "report"?: [{"kind", "message"}]}.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	cjson "github.com/clarketm/json"
	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ign-converter/translate/v23tov30"
	ign2error "github.com/coreos/ignition/config/shared/errors"
	ign2 "github.com/coreos/ignition/config/v2_2"
	ign2types "github.com/coreos/ignition/config/v2_2/types"
	ign23 "github.com/coreos/ignition/config/v2_3"
	validate2 "github.com/coreos/ignition/config/validate"
	ign3error "github.com/coreos/ignition/v2/config/shared/errors"
	v31translate "github.com/coreos/ignition/v2/config/v3_1/translate"
	v32translate "github.com/coreos/ignition/v2/config/v3_2/translate"
	v33translate "github.com/coreos/ignition/v2/config/v3_3/translate"
	v34translate "github.com/coreos/ignition/v2/config/v3_4/translate"
	ign3 "github.com/coreos/ignition/v2/config/v3_5"
	v35translate "github.com/coreos/ignition/v2/config/v3_5/translate"
	ign3types "github.com/coreos/ignition/v2/config/v3_5/types"
)

// What GetSupportedMinorVersions returns for the MCO's converter list.
const supported = "2.2,3.0,3.1,3.2,3.3,3.4,3.5"

type testCase struct {
	Name string `json:"name"`
	// The config: a JSON string is taken as the raw bytes (for inputs that are not
	// JSON objects), anything else as the JSON text itself (indented).
	Input json.RawMessage `json:"input"`
}

func (c testCase) raw() []byte {
	if len(c.Input) > 0 && c.Input[0] == '"' {
		var s string
		if err := json.Unmarshal(c.Input, &s); err != nil {
			panic(err)
		}
		return []byte(s)
	}
	// Indented, so that Go's report highlights (the input line up to the error) stay short.
	var b bytes.Buffer
	if err := json.Indent(&b, c.Input, "", "  "); err != nil {
		panic(err)
	}
	return b.Bytes()
}

type entry struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

type result struct {
	Name     string          `json:"name"`
	Ok       json.RawMessage `json:"ok,omitempty"`
	Error    string          `json:"error,omitempty"`
	Validate string          `json:"validate,omitempty"`
	// The entries of ign2.Parse's report (warnings of a config it accepts, everything of
	// one it refuses), when it ran: their positions aside, what the error text holds.
	Report []entry `json:"report,omitempty"`
}

// lastReport holds the report of the last ign2.Parse.
var lastReport []entry

// parseWrapper is IgnParseWrapper.
func parseWrapper(raw []byte) (interface{}, error) {
	cfg3, rpt3, err3 := ign3.ParseCompatibleVersion(raw)
	if err3 == nil && !rpt3.IsFatal() {
		return cfg3, nil
	}
	if err3.Error() == ign3error.ErrInvalidVersion.Error() {
		return ign3types.Config{}, fmt.Errorf("parsing Ignition config failed: invalid version. Supported spec versions: %s", supported)
	}
	if err3.Error() == ign3error.ErrUnknownVersion.Error() {
		cfg2, rpt2, err2 := ign2.Parse(raw)
		lastReport = nil
		for _, e := range rpt2.Entries {
			lastReport = append(lastReport, entry{Kind: e.Kind.String(), Message: e.Message})
		}
		if err2 == nil && !rpt2.IsFatal() {
			return cfg2, nil
		}
		if err2.Error() == ign2error.ErrUnknownVersion.Error() {
			return ign3types.Config{}, fmt.Errorf("parsing Ignition config failed: unknown version. Supported spec versions: %s", supported)
		}
		return ign3types.Config{}, fmt.Errorf("parsing Ignition spec v2 failed with error: %v\nReport: %v", err2, rpt2)
	}
	return ign3types.Config{}, fmt.Errorf("parsing Ignition config spec v3 failed with error: %v\nReport: %v", err3, rpt3)
}

// dedupeKeys is dedupePasswdUserSSHKeys: first occurrence wins, order kept.
func dedupeKeys(u ign2types.PasswdUser) ign2types.PasswdUser {
	seen := map[ign2types.SSHAuthorizedKey]bool{}
	out := []ign2types.SSHAuthorizedKey{}
	for _, k := range u.SSHAuthorizedKeys {
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	u.SSHAuthorizedKeys = out
	return u
}

// dedupe is removeIgnDuplicateFilesUnitsUsers.
func dedupe(cfg ign2types.Config) (ign2types.Config, error) {
	files, units, users := cfg.Storage.Files, cfg.Systemd.Units, cfg.Passwd.Users
	seenPath := map[string]bool{}
	var outFiles []ign2types.File
	for i := len(files) - 1; i >= 0; i-- {
		if seenPath[files[i].Path] {
			continue
		}
		outFiles = append(outFiles, files[i])
		seenPath[files[i].Path] = true
	}
	seenUnit := map[string]bool{}
	var outUnits []ign2types.Unit
	for i := len(units) - 1; i >= 0; i-- {
		name := units[i].Name
		if seenUnit[name] {
			for j := range outUnits {
				if outUnits[j].Name != name {
					continue
				}
				for _, d := range units[i].Dropins {
					exists := false
					for _, e := range outUnits[j].Dropins {
						if e.Name == d.Name {
							exists = true
							break
						}
					}
					if !exists {
						outUnits[j].Dropins = append(outUnits[j].Dropins, d)
					}
				}
			}
			continue
		}
		outUnits = append(outUnits, units[i])
		seenUnit[name] = true
	}
	if len(users) > 0 {
		out := users[len(users)-1]
		if out.Name != "core" {
			return cfg, fmt.Errorf("unexpected user with name: %v. Only core user is supported", out.Name)
		}
		for i := len(users) - 2; i >= 0; i-- {
			if users[i].Name != "core" {
				return cfg, fmt.Errorf("unexpected user with name: %v. Only core user is supported", users[i].Name)
			}
			out.SSHAuthorizedKeys = append(out.SSHAuthorizedKeys, users[i].SSHAuthorizedKeys...)
		}
		cfg.Passwd.Users = []ign2types.PasswdUser{dedupeKeys(out)}
	}
	cfg.Storage.Files = outFiles
	cfg.Systemd.Units = outUnits
	return cfg, nil
}

// convert is the v2.2 → v3.5 path of ParseAndConvertConfig through the converter chain.
func convert(cfg ign2types.Config) (ign3types.Config, error) {
	v30, err := v23tov30.Translate(ign23.Translate(cfg), map[string]string{"root": "/"})
	if err != nil {
		return ign3types.Config{}, fmt.Errorf("failed to convert Ignition config spec v2 to v3: %w",
			fmt.Errorf("unable to convert Ignition spec v2 config to v3: %w", err))
	}
	v32 := v32translate.Translate(v31translate.Translate(v30))
	return v35translate.Translate(v34translate.Translate(v33translate.Translate(v32))), nil
}

func parseAndConvert(raw []byte) (ign3types.Config, error) {
	c, err := parseWrapper(raw)
	if err != nil {
		return ign3types.Config{}, fmt.Errorf("failed to parse Ignition config: %w", err)
	}
	switch t := c.(type) {
	case ign3types.Config:
		return t, nil
	case ign2types.Config:
		d, err := dedupe(t)
		if err != nil {
			return ign3types.Config{}, err
		}
		if _, err := semver.NewVersion(d.Ignition.Version); err != nil {
			return ign3types.Config{}, err
		}
		return convert(d)
	}
	return ign3types.Config{}, fmt.Errorf("unexpected type")
}

// validate is the Ignition part of ValidateMachineConfig (IgnParseWrapper, then
// ValidateIgnition with validateIgn2FileModes).
func validate(raw []byte) error {
	c, err := parseWrapper(raw)
	if err != nil {
		return err
	}
	cfg, ok := c.(ign2types.Config)
	if !ok {
		return nil
	}
	if reflect.DeepEqual(ign2types.Config{}, cfg) {
		return nil
	}
	if report := validate2.ValidateWithoutSource(reflect.ValueOf(cfg)); report.IsFatal() {
		return fmt.Errorf("invalid ignition V2 config found: %v", report)
	}
	for _, file := range cfg.Storage.Files {
		if file.Mode != nil && os.FileMode(*file.Mode) > os.ModePerm {
			return fmt.Errorf("invalid mode %#o for %s, cannot exceed %#o", *file.Mode, file.Path, os.ModePerm)
		}
	}
	return nil
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	var cases []testCase
	if err := json.Unmarshal(in, &cases); err != nil {
		panic(err)
	}
	out := []result{}
	for _, c := range cases {
		r := result{Name: c.Name}
		lastReport = nil
		cfg, err := parseAndConvert(c.raw())
		r.Report = lastReport
		if err != nil {
			r.Error = err.Error()
		} else {
			b, err := cjson.Marshal(cfg)
			if err != nil {
				panic(err)
			}
			r.Ok = b
		}
		if err := validate(c.raw()); err != nil {
			r.Validate = err.Error()
		}
		out = append(out, r)
	}
	// One result a line: small diffs when the cases change.
	fmt.Println("[")
	for i, r := range out {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			panic(err)
		}
		sep := ","
		if i == len(out)-1 {
			sep = ""
		}
		fmt.Print(strings.TrimSuffix(b.String(), "\n") + sep + "\n")
	}
	fmt.Println("]")
}
