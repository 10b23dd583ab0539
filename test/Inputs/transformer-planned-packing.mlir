module {
  func.func @forward(%arg0: !offload.host<tensor<192x64xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_weight", offload.role = #offload.role<parameter>}, %arg1: !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_bias", offload.role = #offload.role<parameter>}, %arg2: !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.weight", offload.role = #offload.role<parameter>}, %arg3: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.bias", offload.role = #offload.role<parameter>}, %arg4: tensor<128x64xf32> {offload.name = "encoder.layers.0.linear1.weight", offload.role = #offload.role<parameter>}, %arg5: tensor<128xf32> {offload.name = "encoder.layers.0.linear1.bias", offload.role = #offload.role<parameter>}, %arg6: tensor<64x128xf32> {offload.name = "encoder.layers.0.linear2.weight", offload.role = #offload.role<parameter>}, %arg7: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.linear2.bias", offload.role = #offload.role<parameter>}, %arg8: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.weight", offload.role = #offload.role<parameter>}, %arg9: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.bias", offload.role = #offload.role<parameter>}, %arg10: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.weight", offload.role = #offload.role<parameter>}, %arg11: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.bias", offload.role = #offload.role<parameter>}, %arg12: tensor<192x64xf32> {offload.name = "encoder.layers.1.self_attn.in_proj_weight", offload.role = #offload.role<parameter>}, %arg13: !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.1.self_attn.in_proj_bias", offload.role = #offload.role<parameter>}, %arg14: !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.weight", offload.role = #offload.role<parameter>}, %arg15: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.bias", offload.role = #offload.role<parameter>}, %arg16: tensor<128x64xf32> {offload.name = "encoder.layers.1.linear1.weight", offload.role = #offload.role<parameter>}, %arg17: !offload.host<tensor<128xf32>> {offload.name = "encoder.layers.1.linear1.bias", offload.role = #offload.role<parameter>}, %arg18: !offload.host<tensor<64x128xf32>> {offload.name = "encoder.layers.1.linear2.weight", offload.role = #offload.role<parameter>}, %arg19: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.linear2.bias", offload.role = #offload.role<parameter>}, %arg20: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.weight", offload.role = #offload.role<parameter>}, %arg21: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.bias", offload.role = #offload.role<parameter>}, %arg22: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.weight", offload.role = #offload.role<parameter>}, %arg23: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.bias", offload.role = #offload.role<parameter>}, %arg24: !offload.host<tensor<10x64xf32>> {offload.name = "head.weight", offload.role = #offload.role<parameter>}, %arg25: tensor<10xf32> {offload.name = "head.bias", offload.role = #offload.role<parameter>}, %arg26: tensor<8x16x64xf32> {offload.name = "x", offload.role = #offload.role<input>}, %arg27: tensor<8xi64> {offload.name = "y", offload.role = #offload.role<input>}, %arg28: tensor<i64> {offload.name = "optimizer.step", offload.role = #offload.role<optimizer_state>}, %arg29: !offload.host<tensor<192x64xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg30: !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg31: !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg32: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg33: tensor<128x64xf32> {offload.name = "encoder.layers.0.linear1.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg34: tensor<128xf32> {offload.name = "encoder.layers.0.linear1.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg35: tensor<64x128xf32> {offload.name = "encoder.layers.0.linear2.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg36: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.linear2.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg37: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg38: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg39: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg40: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg41: tensor<192x64xf32> {offload.name = "encoder.layers.1.self_attn.in_proj_weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg42: !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.1.self_attn.in_proj_bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg43: !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg44: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg45: tensor<128x64xf32> {offload.name = "encoder.layers.1.linear1.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg46: !offload.host<tensor<128xf32>> {offload.name = "encoder.layers.1.linear1.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg47: !offload.host<tensor<64x128xf32>> {offload.name = "encoder.layers.1.linear2.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg48: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.linear2.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg49: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg50: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg51: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg52: !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg53: !offload.host<tensor<10x64xf32>> {offload.name = "head.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>}, %arg54: tensor<10xf32> {offload.name = "head.bias.momentum_buffer", offload.role = #offload.role<optimizer_state>}) -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}, !offload.host<tensor<192x64xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<192x64xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.0.self_attn.in_proj_bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.self_attn.out_proj.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<128x64xf32> {offload.name = "encoder.layers.0.linear1.weight", offload.role = #offload.role<new_parameter>}, tensor<128x64xf32> {offload.name = "encoder.layers.0.linear1.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<128xf32> {offload.name = "encoder.layers.0.linear1.bias", offload.role = #offload.role<new_parameter>}, tensor<128xf32> {offload.name = "encoder.layers.0.linear1.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<64x128xf32> {offload.name = "encoder.layers.0.linear2.weight", offload.role = #offload.role<new_parameter>}, tensor<64x128xf32> {offload.name = "encoder.layers.0.linear2.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.linear2.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.linear2.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm1.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.0.norm2.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<192x64xf32> {offload.name = "encoder.layers.1.self_attn.in_proj_weight", offload.role = #offload.role<new_parameter>}, tensor<192x64xf32> {offload.name = "encoder.layers.1.self_attn.in_proj_weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.1.self_attn.in_proj_bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<192xf32>> {offload.name = "encoder.layers.1.self_attn.in_proj_bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64x64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.self_attn.out_proj.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<128x64xf32> {offload.name = "encoder.layers.1.linear1.weight", offload.role = #offload.role<new_parameter>}, tensor<128x64xf32> {offload.name = "encoder.layers.1.linear1.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<128xf32>> {offload.name = "encoder.layers.1.linear1.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<128xf32>> {offload.name = "encoder.layers.1.linear1.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64x128xf32>> {offload.name = "encoder.layers.1.linear2.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64x128xf32>> {offload.name = "encoder.layers.1.linear2.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.linear2.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.linear2.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm1.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.bias", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<64xf32>> {offload.name = "encoder.layers.1.norm2.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, !offload.host<tensor<10x64xf32>> {offload.name = "head.weight", offload.role = #offload.role<new_parameter>}, !offload.host<tensor<10x64xf32>> {offload.name = "head.weight.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<10xf32> {offload.name = "head.bias", offload.role = #offload.role<new_parameter>}, tensor<10xf32> {offload.name = "head.bias.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}, tensor<i64> {offload.name = "optimizer.step", offload.role = #offload.role<new_optimizer_state>}) attributes {offload.autodiff = "offload-autodiff{beta1=9.000000e-01 beta2=9.990000e-01 dampening=0.000000e+00 eps=1.000000e-08 lr=1.000000e-01 momentum=9.000000e-01 nesterov=false optimizer=sgd return-gradients=false step-counters=shared weight-decay=0.000000e+00}", offload.step} {
    offload.phase forward
    %result, %asyncToken = offload.to_device async %arg0 {prefetch_distance = 1 : i64} : !offload.host<tensor<192x64xf32>>
    %result_0, %asyncToken_1 = offload.to_device async %arg1 {prefetch_distance = 1 : i64} : !offload.host<tensor<192xf32>>
    %result_2, %asyncToken_3 = offload.to_device async %arg2 {prefetch_distance = 14 : i64} : !offload.host<tensor<64x64xf32>>
    %result_4, %asyncToken_5 = offload.to_device async %arg3 {prefetch_distance = 14 : i64} : !offload.host<tensor<64xf32>>
    %result_6, %asyncToken_7 = offload.to_device async %arg8 {prefetch_distance = 17 : i64} : !offload.host<tensor<64xf32>>
    %result_8, %asyncToken_9 = offload.to_device async %arg9 {prefetch_distance = 17 : i64} : !offload.host<tensor<64xf32>>
    %result_10, %asyncToken_11 = offload.to_device async %arg7 {prefetch_distance = 20 : i64} : !offload.host<tensor<64xf32>>
    %result_12, %asyncToken_13 = offload.to_device async %arg10 {prefetch_distance = 22 : i64} : !offload.host<tensor<64xf32>>
    %result_14, %asyncToken_15 = offload.to_device async %arg11 {prefetch_distance = 22 : i64} : !offload.host<tensor<64xf32>>
    %result_16, %asyncToken_17 = offload.to_device async %arg13 {prefetch_distance = 24 : i64} : !offload.host<tensor<192xf32>>
    %result_18, %asyncToken_19 = offload.to_device async %arg14 {prefetch_distance = 37 : i64} : !offload.host<tensor<64x64xf32>>
    %result_20, %asyncToken_21 = offload.to_device async %arg15 {prefetch_distance = 37 : i64} : !offload.host<tensor<64xf32>>
    %result_22, %asyncToken_23 = offload.to_device async %arg20 {prefetch_distance = 40 : i64} : !offload.host<tensor<64xf32>>
    %result_24, %asyncToken_25 = offload.to_device async %arg21 {prefetch_distance = 40 : i64} : !offload.host<tensor<64xf32>>
    %result_26, %asyncToken_27 = offload.to_device async %arg17 {prefetch_distance = 41 : i64} : !offload.host<tensor<128xf32>>
    %result_28, %asyncToken_29 = offload.to_device async %arg18 {prefetch_distance = 43 : i64} : !offload.host<tensor<64x128xf32>>
    %result_30, %asyncToken_31 = offload.to_device async %arg19 {prefetch_distance = 43 : i64} : !offload.host<tensor<64xf32>>
    %result_32, %asyncToken_33 = offload.to_device async %arg22 {prefetch_distance = 45 : i64} : !offload.host<tensor<64xf32>>
    %result_34, %asyncToken_35 = offload.to_device async %arg23 {prefetch_distance = 45 : i64} : !offload.host<tensor<64xf32>>
    %result_36, %asyncToken_37 = offload.to_device async %arg24 {prefetch_distance = 47 : i64} : !offload.host<tensor<10x64xf32>>
    %0 = offload.transpose %arg26 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
    offload.wait [%asyncToken]
    offload.wait [%asyncToken_1]
    %1 = offload.linear %0, %result, %result_0 : tensor<16x8x64xf32>, tensor<192x64xf32>, tensor<192xf32>
    %2 = offload.slice %1 {dim = 2 : i64, end = 64 : i64, start = 0 : i64} : tensor<16x8x192xf32>
    %3 = offload.slice %1 {dim = 2 : i64, end = 128 : i64, start = 64 : i64} : tensor<16x8x192xf32>
    %4 = offload.slice %1 {dim = 2 : i64, end = 192 : i64, start = 128 : i64} : tensor<16x8x192xf32>
    %5 = offload.reshape %2 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %6 = offload.transpose %5 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %7 = offload.reshape %3 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %8 = offload.transpose %7 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %9 = offload.reshape %4 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %10 = offload.transpose %9 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %11 = offload.fill {value = 4.000000e+00 : f64} : tensor<f32>
    %12 = offload.save %11 : tensor<f32>
    %13 = offload.div %6, %11 : tensor<32x16x16xf32>, tensor<f32>
    %14 = offload.matmul %13, %8 {transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %15 = offload.softmax %14 {dim = 2 : i64} : tensor<32x16x16xf32>
    %16 = offload.matmul %15, %10 : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %17 = offload.transpose %16 {perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %18 = offload.reshape %17 : tensor<16x32x16xf32> -> tensor<128x64xf32>
    offload.wait [%asyncToken_3]
    offload.wait [%asyncToken_5]
    %19 = offload.linear %18, %result_2, %result_4 : tensor<128x64xf32>, tensor<64x64xf32>, tensor<64xf32>
    %20 = offload.reshape %19 : tensor<128x64xf32> -> tensor<16x8x64xf32>
    %21 = offload.transpose %20 {perm = array<i64: 1, 0, 2>} : tensor<16x8x64xf32>
    %22 = offload.add %arg26, %21 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    offload.wait [%asyncToken_7]
    offload.wait [%asyncToken_9]
    %result_38, %mean, %rstd = offload.layer_norm %22, %result_6, %result_8 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
    %result_39, %asyncToken_40 = offload.to_host async %22 : tensor<8x16x64xf32>
    %result_41, %asyncToken_42 = offload.to_host async %rstd : tensor<8x16x1xf32>
    %result_43, %asyncToken_44 = offload.to_host async %mean : tensor<8x16x1xf32>
    %23 = offload.linear %result_38, %arg4, %arg5 : tensor<8x16x64xf32>, tensor<128x64xf32>, tensor<128xf32>
    %24 = offload.relu %23 : tensor<8x16x128xf32>
    offload.wait [%asyncToken_44]
    offload.wait [%asyncToken_42]
    offload.wait [%asyncToken_40]
    offload.wait [%asyncToken_11]
    %25 = offload.linear %24, %arg6, %result_10 : tensor<8x16x128xf32>, tensor<64x128xf32>, tensor<64xf32>
    %26 = offload.add %result_38, %25 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    offload.wait [%asyncToken_13]
    offload.wait [%asyncToken_15]
    %result_45, %mean_46, %rstd_47 = offload.layer_norm %26, %result_12, %result_14 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
    %result_48, %asyncToken_49 = offload.to_host async %rstd_47 : tensor<8x16x1xf32>
    %result_50, %asyncToken_51 = offload.to_host async %mean_46 : tensor<8x16x1xf32>
    %27 = offload.transpose %result_45 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
    offload.wait [%asyncToken_17]
    %28 = offload.linear %27, %arg12, %result_16 : tensor<16x8x64xf32>, tensor<192x64xf32>, tensor<192xf32>
    offload.wait [%asyncToken_51]
    offload.wait [%asyncToken_49]
    %29 = offload.slice %28 {dim = 2 : i64, end = 64 : i64, start = 0 : i64} : tensor<16x8x192xf32>
    %30 = offload.slice %28 {dim = 2 : i64, end = 128 : i64, start = 64 : i64} : tensor<16x8x192xf32>
    %31 = offload.slice %28 {dim = 2 : i64, end = 192 : i64, start = 128 : i64} : tensor<16x8x192xf32>
    %32 = offload.reshape %29 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %33 = offload.transpose %32 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %34 = offload.reshape %30 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %35 = offload.transpose %34 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %36 = offload.save %35 : tensor<32x16x16xf32>
    %37 = offload.reshape %31 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
    %38 = offload.transpose %37 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %39 = offload.fill {value = 4.000000e+00 : f64} : tensor<f32>
    %40 = offload.save %39 : tensor<f32>
    %41 = offload.div %33, %39 : tensor<32x16x16xf32>, tensor<f32>
    %42 = offload.save %41 : tensor<32x16x16xf32>
    %43 = offload.matmul %41, %35 {transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %44 = offload.softmax %43 {dim = 2 : i64} : tensor<32x16x16xf32>
    %45 = offload.matmul %44, %38 : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %46 = offload.transpose %45 {perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %47 = offload.reshape %46 : tensor<16x32x16xf32> -> tensor<128x64xf32>
    %48 = offload.save %47 : tensor<128x64xf32>
    offload.wait [%asyncToken_19]
    offload.wait [%asyncToken_21]
    %49 = offload.linear %47, %result_18, %result_20 : tensor<128x64xf32>, tensor<64x64xf32>, tensor<64xf32>
    %50 = offload.reshape %49 : tensor<128x64xf32> -> tensor<16x8x64xf32>
    %51 = offload.transpose %50 {perm = array<i64: 1, 0, 2>} : tensor<16x8x64xf32>
    %52 = offload.add %result_45, %51 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    %53 = offload.save %52 : tensor<8x16x64xf32>
    offload.wait [%asyncToken_23]
    offload.wait [%asyncToken_25]
    %result_52, %mean_53, %rstd_54 = offload.layer_norm %52, %result_22, %result_24 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
    %result_55, %asyncToken_56 = offload.to_host async %rstd_54 : tensor<8x16x1xf32>
    %result_57, %asyncToken_58 = offload.to_host async %mean_53 : tensor<8x16x1xf32>
    offload.wait [%asyncToken_27]
    %54 = offload.linear %result_52, %arg16, %result_26 : tensor<8x16x64xf32>, tensor<128x64xf32>, tensor<128xf32>
    %55 = offload.relu %54 : tensor<8x16x128xf32>
    offload.wait [%asyncToken_58]
    offload.wait [%asyncToken_56]
    %56 = offload.save %55 : tensor<8x16x128xf32>
    offload.wait [%asyncToken_29]
    offload.wait [%asyncToken_31]
    %57 = offload.linear %55, %result_28, %result_30 : tensor<8x16x128xf32>, tensor<64x128xf32>, tensor<64xf32>
    %58 = offload.add %result_52, %57 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    %59 = offload.save %58 : tensor<8x16x64xf32>
    offload.wait [%asyncToken_33]
    offload.wait [%asyncToken_35]
    %result_59, %mean_60, %rstd_61 = offload.layer_norm %58, %result_32, %result_34 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
    %60 = offload.save %rstd_61 : tensor<8x16x1xf32>
    %61 = offload.save %mean_60 : tensor<8x16x1xf32>
    %62 = offload.reduce_mean %result_59 {dims = array<i64: 1>} : tensor<8x16x64xf32>
    %63 = offload.save %62 : tensor<8x64xf32>
    offload.wait [%asyncToken_37]
    %64 = offload.linear %62, %result_36, %arg25 : tensor<8x64xf32>, tensor<10x64xf32>, tensor<10xf32>
    %65 = offload.save %64 : tensor<8x10xf32>
    %66 = offload.cross_entropy %64, %arg27 : tensor<8x10xf32>, tensor<8xi64>
    offload.phase backward
    %result_62, %asyncToken_63 = offload.to_device async %arg22 {prefetch_distance = 9 : i64} : !offload.host<tensor<64xf32>>
    %67 = offload.fill {value = 1.000000e+00 : f64} : tensor<f32>
    %68 = offload.restore %65 : !offload.saved<tensor<8x10xf32>>
    %69 = offload.cross_entropy_backward %67, %68, %arg27 {offload.activation_grad} : tensor<f32>, tensor<8x10xf32>, tensor<8xi64>
    %70 = offload.restore %63 : !offload.saved<tensor<8x64xf32>>
    %71 = offload.matmul %69, %result_36 {offload.activation_grad} : tensor<8x10xf32>, tensor<10x64xf32>
    %72 = offload.matmul %69, %70 {transpose_a = true} : tensor<8x10xf32>, tensor<8x64xf32>
    %result_64, %asyncToken_65 = offload.to_host async %72 : tensor<10x64xf32>
    %result_66 = offload.to_host  %arg28 : tensor<i64>
    offload.wait [%asyncToken_65]
    %new_param, %new_momentum_buffer, %new_step = offload.sgd_update %arg24, %result_64, %arg53, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<10x64xf32>>, !offload.host<tensor<i64>>
    %73 = offload.reduce_sum %69 {dims = array<i64: 0>} : tensor<8x10xf32>
    %new_param_67, %new_momentum_buffer_68, %new_step_69 = offload.sgd_update %arg25, %73, %arg54, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<10xf32>, tensor<i64>
    %74 = offload.mul_scalar %71 {value = 6.250000e-02 : f64} : tensor<8x64xf32>
    %75 = offload.reshape %74 : tensor<8x64xf32> -> tensor<8x1x64xf32>
    %76 = offload.broadcast_to %75 {offload.activation_grad} : tensor<8x1x64xf32> -> tensor<8x16x64xf32>
    %77 = offload.restore %59 : !offload.saved<tensor<8x16x64xf32>>
    %78 = offload.restore %61 : !offload.saved<tensor<8x16x1xf32>>
    %79 = offload.restore %60 : !offload.saved<tensor<8x16x1xf32>>
    offload.wait [%asyncToken_63]
    %grad_input, %grad_weight, %grad_bias = offload.layer_norm_backward %76, %77, %result_62, %78, %79 {normalized_ndim = 1 : i64, offload.activation_grad} : tensor<8x16x64xf32>, tensor<64xf32>, tensor<8x16x1xf32>
    %result_70, %asyncToken_71 = offload.to_host async %grad_bias : tensor<64xf32>
    %result_72, %asyncToken_73 = offload.to_host async %grad_weight : tensor<64xf32>
    offload.wait [%asyncToken_71]
    %new_param_74, %new_momentum_buffer_75, %new_step_76 = offload.sgd_update %arg23, %result_70, %arg52, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    offload.wait [%asyncToken_73]
    %new_param_77, %new_momentum_buffer_78, %new_step_79 = offload.sgd_update %arg22, %result_72, %arg51, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %80 = offload.restore %56 : !offload.saved<tensor<8x16x128xf32>>
    %81 = offload.matmul %grad_input, %result_28 {offload.activation_grad} : tensor<8x16x64xf32>, tensor<64x128xf32>
    %82 = offload.reshape %grad_input : tensor<8x16x64xf32> -> tensor<128x64xf32>
    %83 = offload.reshape %80 : tensor<8x16x128xf32> -> tensor<128x128xf32>
    %84 = offload.matmul %82, %83 {transpose_a = true} : tensor<128x64xf32>, tensor<128x128xf32>
    %result_80, %asyncToken_81 = offload.to_host async %84 : tensor<64x128xf32>
    offload.wait [%asyncToken_81]
    %new_param_82, %new_momentum_buffer_83, %new_step_84 = offload.sgd_update %arg18, %result_80, %arg47, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64x128xf32>>, !offload.host<tensor<i64>>
    %85 = offload.reduce_sum %grad_input {dims = array<i64: 0, 1>} : tensor<8x16x64xf32>
    %result_85, %asyncToken_86 = offload.to_host async %85 : tensor<64xf32>
    offload.wait [%asyncToken_86]
    %new_param_87, %new_momentum_buffer_88, %new_step_89 = offload.sgd_update %arg19, %result_85, %arg48, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %86 = offload.restore %56 : !offload.saved<tensor<8x16x128xf32>>
    %result_90, %asyncToken_91 = offload.to_device async %arg20 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_92, %asyncToken_93 = offload.to_device async %arg21 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %87 = offload.relu_backward %81, %86 {offload.activation_grad} : tensor<8x16x128xf32>
    %88 = offload.restore %53 : !offload.saved<tensor<8x16x64xf32>>
    offload.wait [%asyncToken_91]
    offload.wait [%asyncToken_93]
    %89 = offload.recompute(%88, %result_90, %result_92) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x16x64xf32> {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<64xf32>, %arg57: tensor<64xf32>):
      %result_227, %mean_228, %rstd_229 = offload.layer_norm %arg55, %arg56, %arg57 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      offload.yield %result_227 : tensor<8x16x64xf32>
    }
    %90 = offload.matmul %87, %arg16 {offload.activation_grad} : tensor<8x16x128xf32>, tensor<128x64xf32>
    %91 = offload.reshape %87 : tensor<8x16x128xf32> -> tensor<128x128xf32>
    %92 = offload.reshape %89 : tensor<8x16x64xf32> -> tensor<128x64xf32>
    %93 = offload.matmul %91, %92 {transpose_a = true} : tensor<128x128xf32>, tensor<128x64xf32>
    %result_94, %asyncToken_95 = offload.to_device async %arg14 {prefetch_distance = 8 : i64} : !offload.host<tensor<64x64xf32>>
    %new_param_96, %new_momentum_buffer_97, %new_step_98 = offload.sgd_update %arg16, %93, %arg45, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<128x64xf32>, tensor<i64>
    %94 = offload.reduce_sum %87 {dims = array<i64: 0, 1>} : tensor<8x16x128xf32>
    %result_99, %asyncToken_100 = offload.to_host async %94 : tensor<128xf32>
    offload.wait [%asyncToken_100]
    %new_param_101, %new_momentum_buffer_102, %new_step_103 = offload.sgd_update %arg17, %result_99, %arg46, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<128xf32>>, !offload.host<tensor<i64>>
    %result_104, %asyncToken_105 = offload.to_device async [%asyncToken_58] %result_57 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %result_106, %asyncToken_107 = offload.to_device async [%asyncToken_56] %result_55 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %result_108, %asyncToken_109 = offload.to_device async [%asyncToken_40] %result_39 {prefetch_distance = 12 : i64} : !offload.host<tensor<8x16x64xf32>>
    %95 = offload.add %grad_input, %90 {offload.activation_grad} : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    %96 = offload.restore %53 : !offload.saved<tensor<8x16x64xf32>>
    offload.wait [%asyncToken_105]
    offload.wait [%asyncToken_107]
    %grad_input_110, %grad_weight_111, %grad_bias_112 = offload.layer_norm_backward %95, %96, %result_90, %result_104, %result_106 {normalized_ndim = 1 : i64, offload.activation_grad} : tensor<8x16x64xf32>, tensor<64xf32>, tensor<8x16x1xf32>
    %result_113, %asyncToken_114 = offload.to_host async %grad_bias_112 : tensor<64xf32>
    %result_115, %asyncToken_116 = offload.to_host async %grad_weight_111 : tensor<64xf32>
    offload.wait [%asyncToken_114]
    %new_param_117, %new_momentum_buffer_118, %new_step_119 = offload.sgd_update %arg21, %result_113, %arg50, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    offload.wait [%asyncToken_116]
    %new_param_120, %new_momentum_buffer_121, %new_step_122 = offload.sgd_update %arg20, %result_115, %arg49, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %97 = offload.transpose %grad_input_110 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
    %98 = offload.reshape %97 {offload.activation_grad} : tensor<16x8x64xf32> -> tensor<128x64xf32>
    %99 = offload.restore %48 : !offload.saved<tensor<128x64xf32>>
    offload.wait [%asyncToken_95]
    %100 = offload.matmul %98, %result_94 {offload.activation_grad} : tensor<128x64xf32>, tensor<64x64xf32>
    %101 = offload.matmul %98, %99 {transpose_a = true} : tensor<128x64xf32>, tensor<128x64xf32>
    %result_123, %asyncToken_124 = offload.to_host async %101 : tensor<64x64xf32>
    offload.wait [%asyncToken_124]
    %new_param_125, %new_momentum_buffer_126, %new_step_127 = offload.sgd_update %arg14, %result_123, %arg43, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64x64xf32>>, !offload.host<tensor<i64>>
    %102 = offload.reduce_sum %98 {dims = array<i64: 0>} : tensor<128x64xf32>
    %result_128, %asyncToken_129 = offload.to_host async %102 : tensor<64xf32>
    offload.wait [%asyncToken_129]
    %new_param_130, %new_momentum_buffer_131, %new_step_132 = offload.sgd_update %arg15, %result_128, %arg44, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %103 = offload.reshape %100 {offload.activation_grad} : tensor<128x64xf32> -> tensor<16x32x16xf32>
    %104 = offload.transpose %103 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %105 = offload.restore %42 : !offload.saved<tensor<32x16x16xf32>>
    %106 = offload.restore %36 : !offload.saved<tensor<32x16x16xf32>>
    %result_133, %asyncToken_134 = offload.to_device async %arg7 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_135, %asyncToken_136 = offload.to_device async %arg8 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_137, %asyncToken_138 = offload.to_device async %arg9 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_139, %asyncToken_140 = offload.to_device async %arg10 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_141, %asyncToken_142 = offload.to_device async %arg11 {prefetch_distance = 1 : i64} : !offload.host<tensor<64xf32>>
    %result_143, %asyncToken_144 = offload.to_device async %arg13 {prefetch_distance = 1 : i64} : !offload.host<tensor<192xf32>>
    %107 = offload.recompute(%105, %106) {policy = "marked"} : (tensor<32x16x16xf32>, tensor<32x16x16xf32>) -> tensor<32x16x16xf32> {
    ^bb0(%arg55: tensor<32x16x16xf32>, %arg56: tensor<32x16x16xf32>):
      %183 = offload.matmul %arg55, %arg56 {transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
      %184 = offload.softmax %183 {dim = 2 : i64} : tensor<32x16x16xf32>
      offload.yield %184 : tensor<32x16x16xf32>
    }
    offload.wait [%asyncToken_109]
    offload.wait [%asyncToken_134]
    offload.wait [%asyncToken_136]
    offload.wait [%asyncToken_138]
    offload.wait [%asyncToken_140]
    offload.wait [%asyncToken_142]
    offload.wait [%asyncToken_144]
    %108 = offload.recompute(%result_108, %result_135, %result_137, %arg4, %arg5, %arg6, %result_133, %result_139, %result_141, %arg12, %result_143) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<32x16x16xf32> {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<64xf32>, %arg57: tensor<64xf32>, %arg58: tensor<128x64xf32>, %arg59: tensor<128xf32>, %arg60: tensor<64x128xf32>, %arg61: tensor<64xf32>, %arg62: tensor<64xf32>, %arg63: tensor<64xf32>, %arg64: tensor<192x64xf32>, %arg65: tensor<192xf32>):
      %result_227, %mean_228, %rstd_229 = offload.layer_norm %arg55, %arg56, %arg57 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      %183 = offload.linear %result_227, %arg58, %arg59 : tensor<8x16x64xf32>, tensor<128x64xf32>, tensor<128xf32>
      %184 = offload.relu %183 : tensor<8x16x128xf32>
      %185 = offload.linear %184, %arg60, %arg61 : tensor<8x16x128xf32>, tensor<64x128xf32>, tensor<64xf32>
      %186 = offload.add %result_227, %185 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
      %result_230, %mean_231, %rstd_232 = offload.layer_norm %186, %arg62, %arg63 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      %187 = offload.transpose %result_230 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
      %188 = offload.linear %187, %arg64, %arg65 : tensor<16x8x64xf32>, tensor<192x64xf32>, tensor<192xf32>
      %189 = offload.slice %188 {dim = 2 : i64, end = 192 : i64, start = 128 : i64} : tensor<16x8x192xf32>
      %190 = offload.reshape %189 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
      %191 = offload.transpose %190 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
      offload.yield %191 : tensor<32x16x16xf32>
    }
    %109 = offload.matmul %104, %108 {offload.activation_grad, transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %110 = offload.matmul %107, %104 {offload.activation_grad, transpose_a = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %111 = offload.softmax_backward %109, %107 {dim = 2 : i64, offload.activation_grad} : tensor<32x16x16xf32>
    %112 = offload.restore %42 : !offload.saved<tensor<32x16x16xf32>>
    %113 = offload.restore %36 : !offload.saved<tensor<32x16x16xf32>>
    %114 = offload.matmul %111, %113 {offload.activation_grad} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %115 = offload.matmul %111, %112 {offload.activation_grad, transpose_a = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %116 = offload.restore %40 : !offload.saved<tensor<f32>>
    %117 = offload.div %114, %116 {offload.activation_grad} : tensor<32x16x16xf32>, tensor<f32>
    %118 = offload.transpose %110 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %119 = offload.reshape %118 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %120 = offload.transpose %115 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %121 = offload.reshape %120 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %122 = offload.transpose %117 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %123 = offload.reshape %122 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %124 = offload.slice_backward %119 {dim = 2 : i64, end = 192 : i64, offload.activation_grad, start = 128 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %125 = offload.slice_backward %121 {dim = 2 : i64, end = 128 : i64, offload.activation_grad, start = 64 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %126 = offload.add %124, %125 {offload.activation_grad} : tensor<16x8x192xf32>, tensor<16x8x192xf32>
    %127 = offload.slice_backward %123 {dim = 2 : i64, end = 64 : i64, offload.activation_grad, start = 0 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %128 = offload.add %126, %127 {offload.activation_grad} : tensor<16x8x192xf32>, tensor<16x8x192xf32>
    %129:2 = offload.recompute(%result_108, %result_135, %result_137, %arg4, %arg5, %arg6, %result_133, %result_139, %result_141) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<64x128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<8x16x64xf32>, tensor<16x8x64xf32>) {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<64xf32>, %arg57: tensor<64xf32>, %arg58: tensor<128x64xf32>, %arg59: tensor<128xf32>, %arg60: tensor<64x128xf32>, %arg61: tensor<64xf32>, %arg62: tensor<64xf32>, %arg63: tensor<64xf32>):
      %result_227, %mean_228, %rstd_229 = offload.layer_norm %arg55, %arg56, %arg57 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      %183 = offload.linear %result_227, %arg58, %arg59 : tensor<8x16x64xf32>, tensor<128x64xf32>, tensor<128xf32>
      %184 = offload.relu %183 : tensor<8x16x128xf32>
      %185 = offload.linear %184, %arg60, %arg61 : tensor<8x16x128xf32>, tensor<64x128xf32>, tensor<64xf32>
      %186 = offload.add %result_227, %185 : tensor<8x16x64xf32>, tensor<8x16x64xf32>
      %result_230, %mean_231, %rstd_232 = offload.layer_norm %186, %arg62, %arg63 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      %187 = offload.transpose %result_230 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
      offload.yield %186, %187 : tensor<8x16x64xf32>, tensor<16x8x64xf32>
    }
    %130 = offload.matmul %128, %arg12 {offload.activation_grad} : tensor<16x8x192xf32>, tensor<192x64xf32>
    %131 = offload.reshape %128 : tensor<16x8x192xf32> -> tensor<128x192xf32>
    %132 = offload.reshape %129#1 : tensor<16x8x64xf32> -> tensor<128x64xf32>
    %133 = offload.matmul %131, %132 {transpose_a = true} : tensor<128x192xf32>, tensor<128x64xf32>
    %new_param_145, %new_momentum_buffer_146, %new_step_147 = offload.sgd_update %arg12, %133, %arg41, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<192x64xf32>, tensor<i64>
    %134 = offload.reduce_sum %128 {dims = array<i64: 0, 1>} : tensor<16x8x192xf32>
    %result_148, %asyncToken_149 = offload.to_host async %134 : tensor<192xf32>
    offload.wait [%asyncToken_149]
    %result_150, %asyncToken_151 = offload.to_device async %arg0 {prefetch_distance = 23 : i64} : !offload.host<tensor<192x64xf32>>
    %new_param_152, %new_momentum_buffer_153, %new_step_154 = offload.sgd_update %arg13, %result_148, %arg42, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<192xf32>>, !offload.host<tensor<i64>>
    %135 = offload.transpose %130 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<16x8x64xf32>
    %result_155, %asyncToken_156 = offload.to_device async [%asyncToken_51] %result_50 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %result_157, %asyncToken_158 = offload.to_device async [%asyncToken_49] %result_48 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %136 = offload.add %grad_input_110, %135 {offload.activation_grad} : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    offload.wait [%asyncToken_156]
    offload.wait [%asyncToken_158]
    %grad_input_159, %grad_weight_160, %grad_bias_161 = offload.layer_norm_backward %136, %129#0, %result_139, %result_155, %result_157 {normalized_ndim = 1 : i64, offload.activation_grad} : tensor<8x16x64xf32>, tensor<64xf32>, tensor<8x16x1xf32>
    %result_162, %asyncToken_163 = offload.to_host async %grad_bias_161 : tensor<64xf32>
    %result_164, %asyncToken_165 = offload.to_host async %grad_weight_160 : tensor<64xf32>
    offload.wait [%asyncToken_163]
    %new_param_166, %new_momentum_buffer_167, %new_step_168 = offload.sgd_update %arg11, %result_162, %arg40, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    offload.wait [%asyncToken_165]
    %new_param_169, %new_momentum_buffer_170, %new_step_171 = offload.sgd_update %arg10, %result_164, %arg39, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %137:2 = offload.recompute(%result_108, %result_135, %result_137, %arg4, %arg5) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> (tensor<8x16x64xf32>, tensor<8x16x128xf32>) {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<64xf32>, %arg57: tensor<64xf32>, %arg58: tensor<128x64xf32>, %arg59: tensor<128xf32>):
      %result_227, %mean_228, %rstd_229 = offload.layer_norm %arg55, %arg56, %arg57 {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<8x16x64xf32>, tensor<64xf32>
      %183 = offload.linear %result_227, %arg58, %arg59 : tensor<8x16x64xf32>, tensor<128x64xf32>, tensor<128xf32>
      %184 = offload.relu %183 : tensor<8x16x128xf32>
      offload.yield %result_227, %184 : tensor<8x16x64xf32>, tensor<8x16x128xf32>
    }
    %138 = offload.matmul %grad_input_159, %arg6 {offload.activation_grad} : tensor<8x16x64xf32>, tensor<64x128xf32>
    %139 = offload.reshape %grad_input_159 : tensor<8x16x64xf32> -> tensor<128x64xf32>
    %140 = offload.reshape %137#1 : tensor<8x16x128xf32> -> tensor<128x128xf32>
    %141 = offload.matmul %139, %140 {transpose_a = true} : tensor<128x64xf32>, tensor<128x128xf32>
    %new_param_172, %new_momentum_buffer_173, %new_step_174 = offload.sgd_update %arg6, %141, %arg35, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<64x128xf32>, tensor<i64>
    %142 = offload.reduce_sum %grad_input_159 {dims = array<i64: 0, 1>} : tensor<8x16x64xf32>
    %result_175, %asyncToken_176 = offload.to_host async %142 : tensor<64xf32>
    offload.wait [%asyncToken_176]
    %new_param_177, %new_momentum_buffer_178, %new_step_179 = offload.sgd_update %arg7, %result_175, %arg36, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %143 = offload.relu_backward %138, %137#1 {offload.activation_grad} : tensor<8x16x128xf32>
    %144 = offload.matmul %143, %arg4 {offload.activation_grad} : tensor<8x16x128xf32>, tensor<128x64xf32>
    %145 = offload.reshape %143 : tensor<8x16x128xf32> -> tensor<128x128xf32>
    %146 = offload.reshape %137#0 : tensor<8x16x64xf32> -> tensor<128x64xf32>
    %147 = offload.matmul %145, %146 {transpose_a = true} : tensor<128x128xf32>, tensor<128x64xf32>
    %new_param_180, %new_momentum_buffer_181, %new_step_182 = offload.sgd_update %arg4, %147, %arg33, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<128x64xf32>, tensor<i64>
    %148 = offload.reduce_sum %143 {dims = array<i64: 0, 1>} : tensor<8x16x128xf32>
    %new_param_183, %new_momentum_buffer_184, %new_step_185 = offload.sgd_update %arg5, %148, %arg34, %arg28 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : tensor<128xf32>, tensor<i64>
    %result_186, %asyncToken_187 = offload.to_device async [%asyncToken_44] %result_43 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %result_188, %asyncToken_189 = offload.to_device async [%asyncToken_42] %result_41 {prefetch_distance = 1 : i64} : !offload.host<tensor<8x16x1xf32>>
    %149 = offload.add %grad_input_159, %144 {offload.activation_grad} : tensor<8x16x64xf32>, tensor<8x16x64xf32>
    offload.wait [%asyncToken_187]
    offload.wait [%asyncToken_189]
    %grad_input_190, %grad_weight_191, %grad_bias_192 = offload.layer_norm_backward %149, %result_108, %result_135, %result_186, %result_188 {normalized_ndim = 1 : i64, offload.activation_grad} : tensor<8x16x64xf32>, tensor<64xf32>, tensor<8x16x1xf32>
    %result_193, %asyncToken_194 = offload.to_host async %grad_bias_192 : tensor<64xf32>
    %result_195, %asyncToken_196 = offload.to_host async %grad_weight_191 : tensor<64xf32>
    offload.wait [%asyncToken_194]
    %new_param_197, %new_momentum_buffer_198, %new_step_199 = offload.sgd_update %arg9, %result_193, %arg38, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    offload.wait [%asyncToken_196]
    %new_param_200, %new_momentum_buffer_201, %new_step_202 = offload.sgd_update %arg8, %result_195, %arg37, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %result_203, %asyncToken_204 = offload.to_device async %arg1 {prefetch_distance = 1 : i64} : !offload.host<tensor<192xf32>>
    %150 = offload.transpose %grad_input_190 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
    %151 = offload.reshape %150 {offload.activation_grad} : tensor<16x8x64xf32> -> tensor<128x64xf32>
    %152 = offload.restore %12 : !offload.saved<tensor<f32>>
    offload.wait [%asyncToken_151]
    offload.wait [%asyncToken_204]
    %result_205, %asyncToken_206 = offload.to_device async %arg2 {prefetch_distance = 1 : i64} : !offload.host<tensor<64x64xf32>>
    %153:4 = offload.recompute(%arg26, %result_150, %result_203, %152) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<192x64xf32>, tensor<192xf32>, tensor<f32>) -> (tensor<32x16x16xf32>, tensor<32x16x16xf32>, tensor<32x16x16xf32>, tensor<128x64xf32>) {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<192x64xf32>, %arg57: tensor<192xf32>, %arg58: tensor<f32>):
      %183 = offload.transpose %arg55 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
      %184 = offload.linear %183, %arg56, %arg57 : tensor<16x8x64xf32>, tensor<192x64xf32>, tensor<192xf32>
      %185 = offload.slice %184 {dim = 2 : i64, end = 128 : i64, start = 64 : i64} : tensor<16x8x192xf32>
      %186 = offload.reshape %185 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
      %187 = offload.transpose %186 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
      %188 = offload.slice %184 {dim = 2 : i64, end = 64 : i64, start = 0 : i64} : tensor<16x8x192xf32>
      %189 = offload.reshape %188 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
      %190 = offload.transpose %189 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
      %191 = offload.div %190, %arg58 : tensor<32x16x16xf32>, tensor<f32>
      %192 = offload.matmul %191, %187 {transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
      %193 = offload.softmax %192 {dim = 2 : i64} : tensor<32x16x16xf32>
      %194 = offload.slice %184 {dim = 2 : i64, end = 192 : i64, start = 128 : i64} : tensor<16x8x192xf32>
      %195 = offload.reshape %194 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
      %196 = offload.transpose %195 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
      %197 = offload.matmul %193, %196 : tensor<32x16x16xf32>, tensor<32x16x16xf32>
      %198 = offload.transpose %197 {perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
      %199 = offload.reshape %198 : tensor<16x32x16xf32> -> tensor<128x64xf32>
      offload.yield %187, %191, %193, %199 : tensor<32x16x16xf32>, tensor<32x16x16xf32>, tensor<32x16x16xf32>, tensor<128x64xf32>
    }
    offload.wait [%asyncToken_206]
    %154 = offload.matmul %151, %result_205 {offload.activation_grad} : tensor<128x64xf32>, tensor<64x64xf32>
    %155 = offload.matmul %151, %153#3 {transpose_a = true} : tensor<128x64xf32>, tensor<128x64xf32>
    %result_207, %asyncToken_208 = offload.to_host async %155 : tensor<64x64xf32>
    offload.wait [%asyncToken_208]
    %new_param_209, %new_momentum_buffer_210, %new_step_211 = offload.sgd_update %arg2, %result_207, %arg31, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64x64xf32>>, !offload.host<tensor<i64>>
    %156 = offload.reduce_sum %151 {dims = array<i64: 0>} : tensor<128x64xf32>
    %result_212, %asyncToken_213 = offload.to_host async %156 : tensor<64xf32>
    offload.wait [%asyncToken_213]
    %new_param_214, %new_momentum_buffer_215, %new_step_216 = offload.sgd_update %arg3, %result_212, %arg32, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<64xf32>>, !offload.host<tensor<i64>>
    %157 = offload.reshape %154 {offload.activation_grad} : tensor<128x64xf32> -> tensor<16x32x16xf32>
    %158 = offload.transpose %157 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
    %159 = offload.recompute(%arg26, %result_150, %result_203) {policy = "marked"} : (tensor<8x16x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<32x16x16xf32> {
    ^bb0(%arg55: tensor<8x16x64xf32>, %arg56: tensor<192x64xf32>, %arg57: tensor<192xf32>):
      %183 = offload.transpose %arg55 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
      %184 = offload.linear %183, %arg56, %arg57 : tensor<16x8x64xf32>, tensor<192x64xf32>, tensor<192xf32>
      %185 = offload.slice %184 {dim = 2 : i64, end = 192 : i64, start = 128 : i64} : tensor<16x8x192xf32>
      %186 = offload.reshape %185 : tensor<16x8x64xf32> -> tensor<16x32x16xf32>
      %187 = offload.transpose %186 {perm = array<i64: 1, 0, 2>} : tensor<16x32x16xf32>
      offload.yield %187 : tensor<32x16x16xf32>
    }
    %160 = offload.matmul %158, %159 {offload.activation_grad, transpose_b = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %161 = offload.matmul %153#2, %158 {offload.activation_grad, transpose_a = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %162 = offload.softmax_backward %160, %153#2 {dim = 2 : i64, offload.activation_grad} : tensor<32x16x16xf32>
    %163 = offload.matmul %162, %153#0 {offload.activation_grad} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %164 = offload.matmul %162, %153#1 {offload.activation_grad, transpose_a = true} : tensor<32x16x16xf32>, tensor<32x16x16xf32>
    %165 = offload.restore %12 : !offload.saved<tensor<f32>>
    %166 = offload.div %163, %165 {offload.activation_grad} : tensor<32x16x16xf32>, tensor<f32>
    %167 = offload.transpose %161 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %168 = offload.reshape %167 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %169 = offload.transpose %164 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %170 = offload.reshape %169 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %171 = offload.transpose %166 {offload.activation_grad, perm = array<i64: 1, 0, 2>} : tensor<32x16x16xf32>
    %172 = offload.reshape %171 {offload.activation_grad} : tensor<16x32x16xf32> -> tensor<16x8x64xf32>
    %173 = offload.slice_backward %168 {dim = 2 : i64, end = 192 : i64, offload.activation_grad, start = 128 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %174 = offload.slice_backward %170 {dim = 2 : i64, end = 128 : i64, offload.activation_grad, start = 64 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %175 = offload.add %173, %174 {offload.activation_grad} : tensor<16x8x192xf32>, tensor<16x8x192xf32>
    %176 = offload.slice_backward %172 {dim = 2 : i64, end = 64 : i64, offload.activation_grad, start = 0 : i64} : tensor<16x8x64xf32> -> tensor<16x8x192xf32>
    %177 = offload.add %175, %176 {offload.activation_grad} : tensor<16x8x192xf32>, tensor<16x8x192xf32>
    %178 = offload.recompute(%arg26) {policy = "marked"} : (tensor<8x16x64xf32>) -> tensor<16x8x64xf32> {
    ^bb0(%arg55: tensor<8x16x64xf32>):
      %183 = offload.transpose %arg55 {perm = array<i64: 1, 0, 2>} : tensor<8x16x64xf32>
      offload.yield %183 : tensor<16x8x64xf32>
    }
    %179 = offload.reshape %177 : tensor<16x8x192xf32> -> tensor<128x192xf32>
    %180 = offload.reshape %178 : tensor<16x8x64xf32> -> tensor<128x64xf32>
    %181 = offload.matmul %179, %180 {transpose_a = true} : tensor<128x192xf32>, tensor<128x64xf32>
    %result_217, %asyncToken_218 = offload.to_host async %181 : tensor<192x64xf32>
    offload.wait [%asyncToken_218]
    %new_param_219, %new_momentum_buffer_220, %new_step_221 = offload.sgd_update %arg0, %result_217, %arg29, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<192x64xf32>>, !offload.host<tensor<i64>>
    %182 = offload.reduce_sum %177 {dims = array<i64: 0, 1>} : tensor<16x8x192xf32>
    %result_222, %asyncToken_223 = offload.to_host async %182 : tensor<192xf32>
    offload.wait [%asyncToken_223]
    %new_param_224, %new_momentum_buffer_225, %new_step_226 = offload.sgd_update %arg1, %result_222, %arg30, %result_66 {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : !offload.host<tensor<192xf32>>, !offload.host<tensor<i64>>
    offload.phase optimizer
    return %66, %new_param_219, %new_momentum_buffer_220, %new_param_224, %new_momentum_buffer_225, %new_param_209, %new_momentum_buffer_210, %new_param_214, %new_momentum_buffer_215, %new_param_180, %new_momentum_buffer_181, %new_param_183, %new_momentum_buffer_184, %new_param_172, %new_momentum_buffer_173, %new_param_177, %new_momentum_buffer_178, %new_param_200, %new_momentum_buffer_201, %new_param_197, %new_momentum_buffer_198, %new_param_169, %new_momentum_buffer_170, %new_param_166, %new_momentum_buffer_167, %new_param_145, %new_momentum_buffer_146, %new_param_152, %new_momentum_buffer_153, %new_param_125, %new_momentum_buffer_126, %new_param_130, %new_momentum_buffer_131, %new_param_96, %new_momentum_buffer_97, %new_param_101, %new_momentum_buffer_102, %new_param_82, %new_momentum_buffer_83, %new_param_87, %new_momentum_buffer_88, %new_param_120, %new_momentum_buffer_121, %new_param_117, %new_momentum_buffer_118, %new_param_77, %new_momentum_buffer_78, %new_param_74, %new_momentum_buffer_75, %new_param, %new_momentum_buffer, %new_param_67, %new_momentum_buffer_68, %new_step_69 : tensor<f32>, !offload.host<tensor<192x64xf32>>, !offload.host<tensor<192x64xf32>>, !offload.host<tensor<192xf32>>, !offload.host<tensor<192xf32>>, !offload.host<tensor<64x64xf32>>, !offload.host<tensor<64x64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, tensor<128x64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>, tensor<64x128xf32>, tensor<64x128xf32>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, tensor<192x64xf32>, tensor<192x64xf32>, !offload.host<tensor<192xf32>>, !offload.host<tensor<192xf32>>, !offload.host<tensor<64x64xf32>>, !offload.host<tensor<64x64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, tensor<128x64xf32>, tensor<128x64xf32>, !offload.host<tensor<128xf32>>, !offload.host<tensor<128xf32>>, !offload.host<tensor<64x128xf32>>, !offload.host<tensor<64x128xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<64xf32>>, !offload.host<tensor<10x64xf32>>, !offload.host<tensor<10x64xf32>>, tensor<10xf32>, tensor<10xf32>, tensor<i64>
  }
}

