package messages

import "strings"

// packagePrefixes are the names Depot's Go errors start with ("topic:
// invalid topic name", "disk: segment closed"), one per package, plus the
// module's own: they say which code failed, which is for its developers,
// not for the people reading an error_message.
var packagePrefixes = map[string]bool{
	"actors": true, "assign": true, "bench": true, "cli": true, "client": true, "controller": true,
	"depot": true, "disk": true, "disks": true, "group": true, "kafka": true, "messages": true,
	"metadata": true, "node": true, "partition": true, "placement": true, "remote": true,
	"state": true, "topic": true, "wire": true,
}

// ErrorText is err's text for an error_message, or for anyone but a Go
// caller: the text with every package prefix left out, at its start and
// after each ": " where a wrapped error begins. A Go error keeps its
// prefixes, and its sentinels for errors.Is; only its text is cleaned.
// ErrorText(nil) is "".
//
//	topic: invalid topic name "a/b": byte 1 ('/') is not ...
//	-> invalid topic name "a/b": byte 1 ('/') is not ...
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	return CleanErrorText(err.Error())
}

// CleanErrorText is ErrorText for an error's text.
func CleanErrorText(text string) string {
	parts := strings.Split(text, ": ")
	kept := parts[:0]
	for i, p := range parts {
		if packagePrefixes[p] && i < len(parts)-1 {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ": ")
}
