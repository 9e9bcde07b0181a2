# dlsym, as this library exports it (see hooks_proc_address.cc).
#
# glibc answers dlsym(RTLD_NEXT, name) relative to the object its caller's
# return address lies in. Calling it from C++ would make that this library,
# and a profiler or allocator preloaded beside us would get its own symbol
# back. So RTLD_NEXT (-1) is forwarded by tail jump, leaving the caller's
# return address in place; every other handle goes to gpuslice_dlsym_impl.
	.text
	.globl dlsym
	.type dlsym, @function
	.p2align 4
dlsym:
	.cfi_startproc
	cmpq $-1, %rdi
	jne gpuslice_dlsym_impl
	movq gpuslice_real_dlsym(%rip), %r11
	testq %r11, %r11
	jz gpuslice_dlsym_impl   # not resolved yet: the first call ever was RTLD_NEXT
	jmp *%r11
	.cfi_endproc
	.size dlsym, .-dlsym
	.section .note.GNU-stack,"",@progbits
