package query

import (
	"slices"
	"strings"
	"testing"

	"codectx/pkg/codectx"
)

func TestSuperNames(t *testing.T) {
	tests := []struct {
		lang codectx.Language
		sig  string
		want string
	}{
		{codectx.Java, "public final class Duration\n        extends BaseDuration\n        implements ReadableDuration, Serializable", "BaseDuration ReadableDuration Serializable"},
		{codectx.Java, "public class MapBinder<K, V> extends AbstractBinder<Map<K, V>> implements com.google.inject.Module {", "AbstractBinder Module"},
		{codectx.Java, "public interface ReadableDuration extends Comparable<ReadableDuration>", "Comparable"},
		{codectx.Java, "public final class Duration", ""},
		{codectx.TypeScript, "export class ZodString extends ZodType<string, ZodStringDef>", "ZodType"},
		{codectx.Python, "class Session(SessionRedirectMixin, metaclass=Meta):", "SessionRedirectMixin"},
		{codectx.Python, "class Plain(object):", ""},
		{codectx.Python, "class Bare:", ""},
		{codectx.Java, "class A extends (", ""}, // hostile: unbalanced
	}
	for _, tt := range tests {
		if got := strings.Join(superNames(tt.lang, tt.sig), " "); got != tt.want {
			t.Errorf("superNames(%q) = %q, want %q", tt.sig, got, tt.want)
		}
	}
}

func TestSuperArm(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"src/Duration.java":         "package p;\n\npublic final class Duration extends BaseDuration implements ReadableDuration {\n  public Duration(long ms) { super(ms); }\n}\n",
		"src/BaseDuration.java":     "package p;\n\npublic abstract class BaseDuration {\n  protected BaseDuration(long ms) { this.ms = ms; }\n  long ms;\n}\n",
		"src/ReadableDuration.java": "package p;\n\npublic interface ReadableDuration {\n  long getMillis();\n}\n",
		"src/Period.java":           "package p;\n\npublic final class Period implements ReadableDuration {\n  public long getMillis() { return 0; }\n}\n",
		"src/Other.java":            "package p;\n\npublic class Other {\n  Duration d;\n}\n",
	})
	e := &Engine{Seg: seg}
	files := func(ids []int) []string {
		var out []string
		for _, p := range paths(seg, ids) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	if got, want := files(e.superArm([]string{"Duration"}, nil)), []string{"src/BaseDuration.java", "src/ReadableDuration.java"}; !slices.Equal(got, want) {
		t.Errorf("superArm(Duration) = %v, want %v (its supertypes, not itself nor a user)", got, want)
	}
	if got, want := files(e.superArm([]string{"ReadableDuration"}, nil)), []string{"src/Duration.java", "src/Period.java"}; !slices.Equal(got, want) {
		t.Errorf("superArm(ReadableDuration) = %v, want %v (its implementations)", got, want)
	}
	if got := e.superArm([]string{"Other", "Missing"}, nil); len(got) != 0 {
		t.Errorf("superArm(Other, Missing) = %v, want none", paths(seg, got))
	}
}

func TestNamesArmClasses(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"src/StringConverter.java": "package p;\n\nclass StringConverter {\n  Object parse(String s) { return s; }\n}\n",
		"src/Duration.java":        "package p;\n\nclass Duration {\n  long ms;\n}\n",
	})
	e := &Engine{Seg: seg}
	q := "Fix Duration conversion from a String converter"
	if got := e.pathArm(q, "", nil, 50, nil); len(got) != 0 {
		t.Errorf("pathArm = %v, want none: Java file names stay out by default", paths(seg, got))
	}
	got := paths(seg, e.namesArm(q, "", nil, 50, nil, true))
	if want := []string{"src/StringConverter.java", "src/Duration.java"}; !slices.Equal(got, want) {
		t.Errorf("namesArm(classes) = %v, want %v", got, want)
	}
}
