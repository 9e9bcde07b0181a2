# The slow path of every generated forwarder (driver_trampolines.S): the slot
# was empty, so the real driver is not resolved yet. r11d holds the symbol's
# index. Save every argument register (integer, vector, and al, the vararg
# count), resolve, restore, and tail-jump to the real function as if the
# forwarder had found it directly. Taken once per symbol at most.
	.text
	.globl gpuslice_trampoline_slow
	.hidden gpuslice_trampoline_slow
	.type gpuslice_trampoline_slow, @function
	.p2align 4
gpuslice_trampoline_slow:
	.cfi_startproc
	pushq %rdi
	.cfi_adjust_cfa_offset 8
	pushq %rsi
	.cfi_adjust_cfa_offset 8
	pushq %rdx
	.cfi_adjust_cfa_offset 8
	pushq %rcx
	.cfi_adjust_cfa_offset 8
	pushq %r8
	.cfi_adjust_cfa_offset 8
	pushq %r9
	.cfi_adjust_cfa_offset 8
	pushq %rax
	.cfi_adjust_cfa_offset 8
	# 7 pushes after the caller's return address: rsp is 16-byte aligned here.
	subq $128, %rsp
	.cfi_adjust_cfa_offset 128
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	movl %r11d, %edi
	call gpuslice_resolve_symbol
	movq %rax, %r11
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	addq $128, %rsp
	.cfi_adjust_cfa_offset -128
	popq %rax
	.cfi_adjust_cfa_offset -8
	popq %r9
	.cfi_adjust_cfa_offset -8
	popq %r8
	.cfi_adjust_cfa_offset -8
	popq %rcx
	.cfi_adjust_cfa_offset -8
	popq %rdx
	.cfi_adjust_cfa_offset -8
	popq %rsi
	.cfi_adjust_cfa_offset -8
	popq %rdi
	.cfi_adjust_cfa_offset -8
	jmp *%r11
	.cfi_endproc
	.size gpuslice_trampoline_slow, .-gpuslice_trampoline_slow
	.section .note.GNU-stack,"",@progbits
