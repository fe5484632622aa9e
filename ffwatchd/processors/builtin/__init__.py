"""The built-in processors, one module each; the registry finds every module here: face_swapper,
face_enhancer, face_anonymizer, frame_enhancer (the upscaler), background_remover,
face_debugger (review pictures beside the result), label."""
