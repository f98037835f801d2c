package image

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
)

// goarch names the architectures an image can be built for, by ELF machine.
var goarch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_ARM:     "arm",
	elf.EM_386:     "386",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// CheckStatic reports whether r holds a static Linux executable, one that
// runs with no dynamic loader and no shared library, and returns its
// architecture as GOARCH names it. Its error says what is wrong: not an
// ELF file, not for Linux, not an executable, a loader it asks for, or a
// library it needs.
func CheckStatic(r io.ReaderAt) (arch string, err error) {
	arch, err = checkStatic(r)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	return arch, nil
}

// checkStatic is CheckStatic, its errors without the package's prefix.
func checkStatic(r io.ReaderAt) (arch string, err error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return "", fmt.Errorf("the binary is not an ELF file: %w", err)
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "", fmt.Errorf("the binary is not a Linux executable (OS ABI %v); build it with GOOS=linux", f.OSABI)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("the binary is not an executable (ELF type %v)", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(p.Open())
			return "", fmt.Errorf("the binary is not static: it asks for the loader %q (build it with CGO_ENABLED=0)", bytes.TrimRight(interp, "\x00"))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("the binary's dynamic section: %w", err)
	}
	if len(libs) > 0 {
		return "", fmt.Errorf("the binary is not static: it needs %v (build it with CGO_ENABLED=0)", libs)
	}
	arch, ok := goarch[f.Machine]
	if !ok || (f.Machine == elf.EM_PPC64 && f.Data != elf.ELFDATA2LSB) {
		return "", fmt.Errorf("the binary is for %v, which this image builder does not know", f.Machine)
	}
	return arch, nil
}
