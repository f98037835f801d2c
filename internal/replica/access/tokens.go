package access

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
)

// parseTokens reads a token file in kube-apiserver's --token-auth-file
// format: one record a line, token,user,uid and an optional fourth column
// of groups, "group1,group2"; further columns are ignored, as there.
//
// It is stricter than kube-apiserver's reader: an empty token, an empty
// user name or a token given twice is an error, where kube-apiserver warns
// and goes on. Errors name the file and the line, never a token.
func parseTokens(data []byte, source string) (*tokenfile.TokenAuthenticator, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	tokens := map[string]*user.DefaultInfo{}
	lineOf := map[string]int{}
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("access: token file %s: line %d: %s", source, line, fmt.Sprintf(format, args...)))
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A csv.ParseError says where, and quotes nothing of the line.
			return nil, fmt.Errorf("access: token file %s: %w", source, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) < 3 {
			bad(line, "has %d columns, want at least 3 (token, user name, user uid)", len(rec))
			continue
		}
		if rec[0] == "" {
			bad(line, "the token is empty")
			continue
		}
		if rec[1] == "" {
			bad(line, "the user name is empty")
		}
		if first, ok := lineOf[rec[0]]; ok {
			bad(line, "has the token of line %d again", first)
			continue
		}
		lineOf[rec[0]] = line
		u := &user.DefaultInfo{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 {
			for _, g := range strings.Split(rec[3], ",") {
				if g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		tokens[rec[0]] = u
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("access: token file %s: holds no token", source)
	}
	return tokenfile.New(tokens), nil
}
