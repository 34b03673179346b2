// Command oracle writes, for each input line, what the MCO's Go libraries produce: the YAML
// of sigs.k8s.io/yaml (ghodss) Marshal over gopkg.in/yaml.v2, and for MachineConfig specs
// the rendered-name hash of pkg/controller/render/hash.go. It is machineos's own program;
// gen.sh builds it against the MCO's vendored libraries (never copied here).
//
// Input lines (JSON):
//
//	{"value": V}                         → yaml.Marshal(V), integers as int64/uint64, other numbers float64
//	{"spec": S, "typed": true|false}     → the rendered-name hash of MachineConfigSpec S; with
//	                                       typed, S.config is first decoded into Ignition's v3_5
//	                                       types.Config and re-encoded with github.com/clarketm/json,
//	                                       as the MCO's MergeMachineConfigs does (it drops omitempty
//	                                       structs whose fields are all empty)
//
// Output lines: {"yaml": ..., "hash": ..., "config": ..., "error": ...}.
package main

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	cjson "github.com/clarketm/json"
	"github.com/ghodss/yaml"
	ign35 "oracle/ign35"
)

// The MCO's salt (pkg/controller/render/hash.go).
var salt = []byte{
	16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110,
	25, 93, 47, 253, 172, 106, 37, 7, 174, 13, 160, 185, 110, 17, 87, 52,
	219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165,
	64, 83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26,
	33, 26, 235, 202, 32, 173, 31, 234, 41, 144, 148, 79, 6, 206, 23, 22,
}

// raw marshals like k8s.io/apimachinery's runtime.RawExtension.
type raw struct{ Raw []byte }

func (r raw) MarshalJSON() ([]byte, error) {
	if r.Raw == nil {
		return []byte("null"), nil
	}
	return r.Raw, nil
}

// spec has the field names, types and tags of openshift/api's MachineConfigSpec.
type spec struct {
	OSImageURL                     string   `json:"osImageURL"`
	BaseOSExtensionsContainerImage string   `json:"baseOSExtensionsContainerImage"`
	Config                         raw      `json:"config,omitempty"`
	KernelArguments                []string `json:"kernelArguments"`
	Extensions                     []string `json:"extensions"`
	FIPS                           bool     `json:"fips"`
	KernelType                     string   `json:"kernelType"`
}

type input struct {
	Value json.RawMessage `json:"value"`
	Typed bool            `json:"typed"`
	Spec  *struct {
		OSImageURL                     string          `json:"osImageURL"`
		BaseOSExtensionsContainerImage string          `json:"baseOSExtensionsContainerImage"`
		Config                         json.RawMessage `json:"config"`
		KernelArguments                []string        `json:"kernelArguments"`
		Extensions                     []string        `json:"extensions"`
		FIPS                           bool            `json:"fips"`
		KernelType                     string          `json:"kernelType"`
	} `json:"spec"`
}

type output struct {
	YAML   string          `json:"yaml"`
	Hash   string          `json:"hash,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// typedNumbers turns json.Numbers into the Go types a struct would hold.
func typedNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, e := range t {
			t[k] = typedNumbers(e)
		}
		return t
	case []interface{}:
		for i, e := range t {
			t[i] = typedNumbers(e)
		}
		return t
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u
			}
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f
	}
	return v
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var in input
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			fmt.Fprintln(os.Stderr, "bad input line:", err)
			os.Exit(2)
		}
		var out output
		var y []byte
		var err error
		if in.Spec == nil {
			d := json.NewDecoder(bytes.NewReader(in.Value))
			d.UseNumber()
			var v interface{}
			if err := d.Decode(&v); err != nil {
				fmt.Fprintln(os.Stderr, "bad value:", err)
				os.Exit(2)
			}
			y, err = yaml.Marshal(typedNumbers(v))
		} else {
			s := spec{
				OSImageURL:                     in.Spec.OSImageURL,
				BaseOSExtensionsContainerImage: in.Spec.BaseOSExtensionsContainerImage,
				KernelArguments:                in.Spec.KernelArguments,
				Extensions:                     in.Spec.Extensions,
				FIPS:                           in.Spec.FIPS,
				KernelType:                     in.Spec.KernelType,
			}
			if len(in.Spec.Config) > 0 && string(in.Spec.Config) != "null" {
				s.Config = raw{[]byte(in.Spec.Config)}
				if in.Typed {
					var c ign35.Config
					if err := json.Unmarshal(in.Spec.Config, &c); err != nil {
						fmt.Fprintln(os.Stderr, "bad config:", err)
						os.Exit(2)
					}
					b, _ := cjson.Marshal(c)
					s.Config = raw{b}
					out.Config = b
				}
			}
			y, err = yaml.Marshal(s)
			if err == nil {
				h := md5.New()
				h.Write(salt)
				h.Write(y)
				out.Hash = fmt.Sprintf("%x", h.Sum(nil))
			}
		}
		if err != nil {
			out.Error = err.Error()
		} else {
			out.YAML = string(y)
		}
		if err := enc.Encode(out); err != nil {
			os.Exit(3)
		}
	}
}
